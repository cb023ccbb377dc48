package dev.sluice.redis;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.List;

/**
 * Where a standalone store finds its primary through Redis Sentinel: the sentinels, asked in turn
 * ({@code SENTINEL GET-MASTER-ADDR-BY-NAME}) each time a connection is made, so that a connection lost in a failover,
 * or left because its node answered {@code READONLY} (demoted), is made again to the primary the sentinels promoted.
 */
record Sentinels(List<InetSocketAddress> nodes, String primary) {

    /**
     * The address of the primary, from the first sentinel that knows it.
     *
     * @throws IOException if none does, with each sentinel's reason
     */
    InetSocketAddress locate(int timeoutMs) throws IOException {
        StringBuilder reasons = new StringBuilder();
        for (InetSocketAddress sentinel : nodes) {
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(sentinel.getHostString(), sentinel.getPort()), timeoutMs);
                socket.setSoTimeout(timeoutMs);
                RespWriter ask = new RespWriter();
                ask.command(new String[] {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", primary}, null, null);
                ask.writeTo(socket.getOutputStream());
                Object answer = new RespReader(socket.getInputStream()).read();
                if (answer instanceof List<?> hostAndPort && hostAndPort.size() == 2) {
                    return InetSocketAddress.createUnresolved(String.valueOf(hostAndPort.get(0)),
                            Integer.parseInt(String.valueOf(hostAndPort.get(1))));
                }
                reasons.append(reasons.isEmpty() ? "" : "; ").append(sentinel.getHostString()).append(':')
                        .append(sentinel.getPort()).append(answer == null ? " knows no primary of that name"
                                : answer instanceof RespReader.Error error ? " answered " + error.message()
                                : " answered " + answer);
            } catch (IOException | NumberFormatException e) {
                reasons.append(reasons.isEmpty() ? "" : "; ").append(sentinel.getHostString()).append(':')
                        .append(sentinel.getPort()).append(": ").append(e.getMessage());
            }
        }
        throw new IOException("no sentinel gave the address of primary " + primary + " (" + reasons + ")");
    }

    @Override
    public String toString() {
        StringBuilder text = new StringBuilder(primary).append(" of sentinels ");
        for (int i = 0; i < nodes.size(); i++) {
            text.append(i == 0 ? "" : ",").append(nodes.get(i).getHostString()).append(':').append(nodes.get(i).getPort());
        }
        return text.toString();
    }
}
