package dev.sluice.server.http;

import io.netty.resolver.AbstractAddressResolver;
import io.netty.resolver.AddressResolver;
import io.netty.resolver.AddressResolverGroup;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.Promise;

import java.net.InetSocketAddress;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * How the gateway's connections find the upstream's name: looked up anew for each connection (by the names
 * {@code names} resolves, as its answers' TTL allows), and, for a name of several addresses (a headless Kubernetes
 * Service), the next address of the preferred family in turn, as nginx's and Envoy's {@code STRICT_DNS} spread them.
 * Netty's resolver took the first address for every connection; its round-robin one picks at random, and from both
 * families, so a name whose IPv6 address nothing listens on failed some connections (a review).
 */
final class AddressesInTurn extends AddressResolverGroup<InetSocketAddress> {
    private final AddressResolverGroup<InetSocketAddress> names;
    private final AtomicInteger next = new AtomicInteger();

    AddressesInTurn(AddressResolverGroup<InetSocketAddress> names) {
        this.names = names;
    }

    @Override
    protected AddressResolver<InetSocketAddress> newResolver(EventExecutor executor) {
        AddressResolver<InetSocketAddress> all = names.getResolver(executor);
        return new AbstractAddressResolver<>(executor, InetSocketAddress.class) {
            @Override
            protected boolean doIsResolved(InetSocketAddress address) {
                return !address.isUnresolved();
            }

            @Override
            protected void doResolve(InetSocketAddress unresolved, Promise<InetSocketAddress> promise) {
                all.resolveAll(unresolved).addListener((Future<List<InetSocketAddress>> found) -> {
                    if (!found.isSuccess()) {
                        promise.tryFailure(found.cause());
                        return;
                    }
                    List<InetSocketAddress> preferred = preferred(found.getNow());
                    promise.trySuccess(preferred.get(Math.floorMod(next.getAndIncrement(), preferred.size())));
                });
            }

            @Override
            protected void doResolveAll(InetSocketAddress unresolved, Promise<List<InetSocketAddress>> promise) {
                all.resolveAll(unresolved).addListener((Future<List<InetSocketAddress>> found) -> {
                    if (found.isSuccess()) {
                        promise.trySuccess(found.getNow());
                    } else {
                        promise.tryFailure(found.cause());
                    }
                });
            }
        };
    }

    /**
     * The addresses of the family of the first ({@code resolveAll} gives the preferred family first: IPv4, unless the
     * JVM prefers IPv6), in their order: the one address a lookup would have given is among them.
     */
    static List<InetSocketAddress> preferred(List<InetSocketAddress> addresses) {
        Class<?> family = addresses.get(0).getAddress().getClass();
        return addresses.stream().filter(address -> address.getAddress().getClass() == family).toList();
    }
}
