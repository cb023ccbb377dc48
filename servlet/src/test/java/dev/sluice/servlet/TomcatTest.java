package dev.sluice.servlet;

import dev.sluice.server.LiveConfig;
import dev.sluice.server.config.ConfigLoader;
import dev.sluice.server.metrics.ServerMetrics;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.apache.catalina.Context;
import org.apache.catalina.startup.Tomcat;
import org.apache.tomcat.util.descriptor.web.FilterDef;
import org.apache.tomcat.util.descriptor.web.FilterMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The filter in Apache Tomcat, which maps welcome files and dispatches held requests its own way: what trying the
 * filter there found, pinned.
 */
class TomcatTest {
    private static final String CONFIG = """
            policies:
              - name: login
                match: {path: /login, methods: [POST]}
                key: [ip]
                algorithm: fixed-window
                limits: [1/1h]
              - name: pace
                match: {path: /d/**}
                key: [ip]
                algorithm: gcra
                limits: [1/1s]
                mode: delay
                max_delay: 5s
              - name: slow
                match: {path: /s/**}
                key: [ip]
                algorithm: gcra
                limits: [1/4s]
                mode: delay
                max_delay: 10s
            """;
    private static final HttpClient CLIENT = HttpClient.newHttpClient();

    @TempDir
    Path base;
    private Tomcat tomcat;
    private Context context;
    private LiveConfig live;
    private final AtomicInteger served = new AtomicInteger();

    /** Tomcat with the filter on /app, asynchronous or not, before a servlet at /login (a welcome file), /d/* and /s/*. */
    private int start(boolean async) throws Exception {
        live = LiveConfig.of(ConfigLoader.parse("tomcat.yaml", CONFIG), new ServerMetrics());
        tomcat = new Tomcat();
        tomcat.setBaseDir(base.toString());
        tomcat.setPort(0);
        tomcat.getConnector();
        context = tomcat.addContext("/app", null);
        HttpServlet servlet = new HttpServlet() {
            @Override
            protected void service(HttpServletRequest request, HttpServletResponse response) throws IOException {
                served.incrementAndGet();
                response.getWriter().write(request.getServletPath());
            }
        };
        Tomcat.addServlet(context, "login", servlet).setAsyncSupported(true);
        context.addServletMappingDecoded("/login", "login");
        Tomcat.addServlet(context, "any", servlet).setAsyncSupported(true);
        context.addServletMappingDecoded("/d/*", "any");
        context.addServletMappingDecoded("/s/*", "any");
        context.addWelcomeFile("login");
        FilterDef filter = new FilterDef();
        filter.setFilterName("sluice");
        filter.setFilter(new SluiceFilter(live));
        filter.setAsyncSupported(Boolean.toString(async));
        context.addFilterDef(filter);
        FilterMap mapping = new FilterMap();
        mapping.setFilterName("sluice");
        mapping.addURLPattern("/*");
        context.addFilterMap(mapping);
        tomcat.start();
        return tomcat.getConnector().getLocalPort();
    }

    @AfterEach
    void stop() throws Exception {
        tomcat.stop();
        tomcat.destroy();
        live.close();
    }

    private static HttpResponse<String> send(String method, String url) throws Exception {
        return CLIENT.send(HttpRequest.newBuilder(URI.create(url)).method(method, HttpRequest.BodyPublishers.noBody())
                .timeout(Duration.ofSeconds(20)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /** Tomcat serves /app/ with the login servlet (a welcome file): a policy for /login decides it. */
    @Test
    void aWelcomeFileServedByAServletIsDecidedAsThatServletsPath() throws Exception {
        int port = start(true);
        HttpResponse<String> first = send("POST", "http://127.0.0.1:" + port + "/app/");
        assertThat(first.statusCode()).isEqualTo(200);
        assertThat(first.body()).isEqualTo("/login");
        assertThat(send("POST", "http://127.0.0.1:" + port + "/app/").statusCode()).isEqualTo(429);
        assertThat(send("POST", "http://127.0.0.1:" + port + "/app/login").statusCode()).isEqualTo(429);
        assertThat(served.get()).isEqualTo(1);
    }

    /**
     * A request held its turn goes on to its servlet, though Tomcat cannot dispatch {@code //app/...} again by its URI:
     * before, its answer was the container's 500, 30 s later.
     */
    @Test
    void aHeldRequestOfADoubleSlashGoesOnAfterItsTurn() throws Exception {
        int port = start(true);
        assertThat(send("GET", "http://127.0.0.1:" + port + "//app/d/x").statusCode()).isEqualTo(200);
        long sent = System.nanoTime();
        HttpResponse<String> held = send("GET", "http://127.0.0.1:" + port + "//app/d/x");
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - sent);
        assertThat(held.statusCode()).isEqualTo(200);
        assertThat(took).as("held its turn, and no longer").isBetween(900L, 5_000L);
        assertThat(served.get()).isEqualTo(2);
    }

    /**
     * A filter that is not asynchronous holds a request on its thread; the application stopped meanwhile, the request
     * is answered 503 rather than sent to servlets already destroyed.
     */
    @Test
    void aRequestHeldOnItsThreadWhileTheApplicationStopsIsAnswered503() throws Exception {
        int port = start(false);
        assertThat(send("GET", "http://127.0.0.1:" + port + "/app/s/x").statusCode()).isEqualTo(200);
        CompletableFuture<HttpResponse<String>> held = CompletableFuture.supplyAsync(() -> {
            try {
                return send("GET", "http://127.0.0.1:" + port + "/app/s/x"); // held 4 s
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        Thread.sleep(300);
        context.stop(); // waits up to 2 s for requests in progress, then destroys the filter
        HttpResponse<String> answer = held.get(20, TimeUnit.SECONDS);
        assertThat(answer.statusCode()).isEqualTo(503);
        assertThat(answer.body()).isEqualTo("{\"error\":\"the application is stopping\"}");
        assertThat(served.get()).isEqualTo(1);
    }
}
