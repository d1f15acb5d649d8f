package io.staticfleet.examples.streams;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.BooleanSupplier;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * {@code GET /ready} on READY_PORT, for an httpGet readiness probe: the kubelet makes that request itself,
 * where an exec probe ({@code test -f READY_FILE}) starts a process in the container at every period. It
 * answers 200 while the instance is RUNNING (while READY_FILE exists), 503 otherwise, and 404 to anything
 * else.
 */
final class ReadyEndpoint implements AutoCloseable {
    private final HttpServer server;
    private final ExecutorService executor;

    private ReadyEndpoint(HttpServer server, ExecutorService executor) {
        this.server = server;
        this.executor = executor;
    }

    /**
     * Serves on every address of the pod (the kubelet probes the pod's IP, IPv4 or IPv6), asking
     * {@code ready} at each request.
     */
    static ReadyEndpoint start(int port, BooleanSupplier ready) throws IOException {
        HttpServer server = HttpServer.create(new InetSocketAddress(port), 0);
        // One daemon thread is enough for a probe a period, and it does not keep the JVM alive.
        ExecutorService executor = Executors.newSingleThreadExecutor(task -> {
            Thread thread = new Thread(task, "ready-endpoint");
            thread.setDaemon(true);
            return thread;
        });
        server.setExecutor(executor);
        server.createContext("/", exchange -> answer(exchange, ready));
        server.start();
        return new ReadyEndpoint(server, executor);
    }

    private static void answer(HttpExchange exchange, BooleanSupplier ready) throws IOException {
        try {
            int status;
            String body;
            // A context matches every path it prefixes: "/ready" alone is the endpoint.
            if (!exchange.getRequestMethod().equals("GET") || !exchange.getRequestURI().getPath().equals("/ready")) {
                status = 404;
                body = "not found\n";
            } else if (ready.getAsBoolean()) {
                status = 200;
                body = "ready\n";
            } else {
                status = 503;
                body = "not ready\n";
            }
            byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
            exchange.sendResponseHeaders(status, bytes.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(bytes);
            }
        } finally {
            exchange.close();
        }
    }

    /** Stops listening at once; a probe then finds the port closed, as for a container that has exited. */
    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
