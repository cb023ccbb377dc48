package dev.sluice.redis;

import io.netty.util.Timer;

import javax.net.ssl.SSLSocketFactory;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.util.List;

/**
 * Where a standalone store finds its primary through Redis Sentinel: the sentinels, asked in turn
 * ({@code SENTINEL GET-MASTER-ADDR-BY-NAME}) each time a connection is made, so that a connection lost in a failover,
 * or left because its node answered {@code READONLY} (demoted), is made again to the primary the sentinels promoted.
 * The one that answered last is asked first: a sentinel that does not answer costs its time once, not at every
 * connection of the store. Through {@code rediss-sentinel://} the sentinels are asked over TLS, as the primary is
 * reached.
 */
final class Sentinels {
    private final List<InetSocketAddress> nodes;
    private final String primary;
    /** The credentials of the address, the primary's, or nulls. */
    private final String user;
    private final String password;
    /** The sockets of a {@code rediss-sentinel://} store, whose sentinels speak TLS too; null for plain sockets. */
    private final SSLSocketFactory tls;
    /** The sentinel that answered last, asked first. */
    private volatile int answered;

    /**
     * @param user     the user of the address's credentials, or null
     * @param password the password of the address's credentials, or null; sentinels are sent it too ({@code AUTH},
     *                 with the question in one write): a sentinel with {@code requirepass} answered every question
     *                 {@code NOAUTH}, and the common deployments give the sentinels the primary's password. A sentinel
     *                 without one refuses the {@code AUTH}, and answers the question all the same.
     * @param tls      the sockets the primary is reached with over TLS, whose trust the sentinels' certificates are
     *                 checked against too (as Redis's own {@code tls-replication} deployments have them speak TLS
     *                 only); null for plain sentinels
     */
    Sentinels(List<InetSocketAddress> nodes, String primary, String user, String password, SSLSocketFactory tls) {
        this.nodes = List.copyOf(nodes);
        this.primary = primary;
        this.user = user;
        this.password = password;
        this.tls = tls;
    }

    /**
     * The address of the primary, from the first sentinel that knows it; each sentinel is given {@code timeoutMs} in
     * all, to connect and answer (one that sends a byte at a time is given up on then).
     *
     * @throws IOException if none does, with each sentinel's reason
     */
    InetSocketAddress locate(int timeoutMs, Timer timer) throws IOException {
        StringBuilder reasons = new StringBuilder();
        boolean anyReached = false;
        int first = answered;
        for (int i = 0; i < nodes.size(); i++) {
            int at = (first + i) % nodes.size();
            InetSocketAddress sentinel = nodes.get(at);
            Object answer;
            try {
                answer = ask(sentinel, timeoutMs, timer);
                if (answer instanceof List<?> hostAndPort && hostAndPort.size() == 2) {
                    answered = at;
                    return InetSocketAddress.createUnresolved(String.valueOf(hostAndPort.get(0)),
                            Integer.parseInt(String.valueOf(hostAndPort.get(1))));
                }
            } catch (IOException | NumberFormatException e) {
                answer = e;
            }
            anyReached |= !(answer instanceof ScriptConnection.Unreachable);
            reasons.append(reasons.isEmpty() ? "" : "; ").append(sentinel.getHostString()).append(':')
                    .append(sentinel.getPort()).append(answer == null ? " knows no primary of that name"
                            : answer instanceof RespReader.Error error ? " answered " + error.message()
                            : answer instanceof Exception e ? ": " + e.getMessage() : " answered " + answer);
        }
        String why = "no sentinel gave the address of primary " + primary + " (" + reasons + ")";
        // none reached: Redis down, for a store that connects in the background to retry; one that answered, a
        // mistake of the address (a primary no sentinel knows, a password refused)
        throw anyReached ? new IOException(why) : new ScriptConnection.Unreachable(why, null);
    }

    private Object ask(InetSocketAddress sentinel, int timeoutMs, Timer timer) throws IOException {
        try (Socket plain = new Socket(); SocketDeadline deadline = new SocketDeadline(plain, timeoutMs, timer)) {
            try {
                plain.connect(new InetSocketAddress(sentinel.getHostString(), sentinel.getPort()), timeoutMs);
            } catch (IOException e) {
                throw new ScriptConnection.Unreachable(deadline.explain(e, "no answer within " + timeoutMs + " ms")
                        .getMessage(), e);
            }
            try {
                plain.setSoTimeout(timeoutMs);
                // a handshake refused (a certificate not trusted, a sentinel that speaks no TLS) is told as it is
                Socket socket = tls == null ? plain
                        : ScriptConnection.secured(tls, plain, sentinel.getHostString(), sentinel.getPort());
                java.io.ByteArrayOutputStream both = new java.io.ByteArrayOutputStream();
                RespWriter ask = new RespWriter();
                if (password != null) {
                    ask.command(user == null ? new String[] {"AUTH", password} : new String[] {"AUTH", user, password},
                            null, null);
                    ask.writeTo(both);
                }
                ask.command(new String[] {"SENTINEL", "GET-MASTER-ADDR-BY-NAME", primary}, null, null);
                ask.writeTo(both);
                socket.getOutputStream().write(both.toByteArray());
                RespReader reader = new RespReader(socket.getInputStream());
                Object authenticated = password == null ? null : reader.read();
                Object answer;
                try {
                    answer = reader.read();
                } catch (IOException e) {
                    if (authenticated instanceof RespReader.Error refused) {
                        return refused; // the sentinel refused and closed (protected mode: DENIED): say why
                    }
                    throw e;
                }
                if (answer instanceof RespReader.Error refused && authenticated instanceof RespReader.Error why
                        && refused.message().startsWith("NOAUTH")) {
                    // the question refused for want of a password: the password's own refusal says why
                    return new RespReader.Error(refused.message() + " (AUTH with the address's credentials answered: "
                            + why.message() + ")");
                }
                return answer;
            } catch (ScriptConnection.Refused e) {
                throw e;
            } catch (IOException e) { // silent, or gone before it answered: not reached
                // (a plain port asked over TLS is silent too: it waits for the end of a line the handshake never sends)
                IOException explained = deadline.explain(e, "no answer within " + timeoutMs + " ms"
                        + (tls == null ? "" : " (TLS handshake, then SENTINEL GET-MASTER-ADDR-BY-NAME)"));
                throw new ScriptConnection.Unreachable(explained.getMessage(), explained == e ? e : null);
            }
        }
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
