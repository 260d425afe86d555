package io.camellab.service;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;

import com.sun.net.httpserver.HttpServer;

/** The mock backend's stand-in: GET /data answers the set status and body after the set delay. */
final class Backend implements AutoCloseable {

    private final HttpServer server;
    private final AtomicInteger calls = new AtomicInteger();
    private volatile int status = 200;
    private volatile String body = "{}";
    private volatile long delayMs;

    /** Started, for a test class's static field (no checked exception there). */
    static Backend started() {
        try {
            return new Backend();
        } catch (IOException e) {
            throw new IllegalStateException("the test backend could not start", e);
        }
    }

    private Backend() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 50);
        server.setExecutor(Executors.newCachedThreadPool());
        server.createContext("/data", exchange -> {
            calls.incrementAndGet();
            try {
                Thread.sleep(delayMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            byte[] reply = body.getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "application/json");
            exchange.sendResponseHeaders(status, reply.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(reply);
            }
        });
        server.start();
    }

    Backend answer(int status, String body, long delayMs) {
        this.status = status;
        this.body = body;
        this.delayMs = delayMs;
        return this;
    }

    String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort() + "/data";
    }

    int calls() {
        return calls.get();
    }

    @Override
    public void close() {
        server.stop(0);
    }
}
