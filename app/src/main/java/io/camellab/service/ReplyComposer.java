package io.camellab.service;

import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.time.Duration;
import java.time.Instant;
import java.util.UUID;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.camel.Exchange;
import org.apache.camel.Message;
import org.apache.camel.http.base.HttpOperationFailedException;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.stereotype.Component;

/** Builds the JSON replies of the mock route: the composed success reply and the error replies. */
@Component
public class ReplyComposer {

    static final String TRANSACTION_ID = "transactionId";
    private static final String RECEIVED_AT = "receivedAt";

    private final ObjectMapper mapper;
    private final String nodeName;

    public ReplyComposer(ObjectMapper mapper, @Value("${lab.node-name:}") String nodeName) {
        this.mapper = mapper;
        this.nodeName = nodeName.isBlank() ? localHostName() : nodeName;
    }

    public void begin(Exchange exchange) {
        exchange.setProperty(TRANSACTION_ID, UUID.randomUUID().toString());
        exchange.setProperty(RECEIVED_AT, Instant.now());
    }

    public void compose(Exchange exchange) throws IOException {
        Message message = exchange.getMessage();
        ObjectNode reply = envelope(exchange);
        reply.put("backendStatus", message.getHeader(Exchange.HTTP_RESPONSE_CODE, Integer.class));
        reply.set("data", mapper.readTree(message.getBody(byte[].class)));
        write(exchange, 200, reply);
    }

    public void backendFailed(Exchange exchange) throws IOException {
        HttpOperationFailedException failure = caught(exchange, HttpOperationFailedException.class);
        ObjectNode reply = error(exchange, 502, "backend replied with HTTP " + failure.getStatusCode());
        reply.put("backendStatus", failure.getStatusCode());
        write(exchange, 502, reply);
    }

    public void backendTimedOut(Exchange exchange) throws IOException {
        write(exchange, 504, error(exchange, 504, "backend timed out: " + caught(exchange, Exception.class).getMessage()));
    }

    public void poolExhausted(Exchange exchange) throws IOException {
        write(exchange, 503, error(exchange, 503, "no backend connection free in the HTTP client pool"));
    }

    public void backendUnreachable(Exchange exchange) throws IOException {
        write(exchange, 502, error(exchange, 502, "backend unreachable: " + caught(exchange, Exception.class).getMessage()));
    }

    private ObjectNode error(Exchange exchange, int status, String error) {
        ObjectNode reply = envelope(exchange);
        reply.put("status", status);
        reply.put("error", error);
        return reply;
    }

    private ObjectNode envelope(Exchange exchange) {
        Instant receivedAt = exchange.getProperty(RECEIVED_AT, Instant.class);
        Instant now = Instant.now();
        ObjectNode reply = mapper.createObjectNode();
        reply.put(TRANSACTION_ID, exchange.getProperty(TRANSACTION_ID, String.class));
        reply.put("node", nodeName);
        reply.put(RECEIVED_AT, receivedAt.toString());
        reply.put("repliedAt", now.toString());
        reply.put("elapsedMs", Duration.between(receivedAt, now).toMillis());
        return reply;
    }

    private void write(Exchange exchange, int status, ObjectNode reply) throws IOException {
        Message message = exchange.getMessage();
        message.removeHeaders("*");
        message.setHeader(Exchange.HTTP_RESPONSE_CODE, status);
        message.setHeader(Exchange.CONTENT_TYPE, "application/json");
        message.setBody(mapper.writeValueAsString(reply));
    }

    private static <T extends Exception> T caught(Exchange exchange, Class<T> type) {
        return exchange.getProperty(Exchange.EXCEPTION_CAUGHT, type);
    }

    private static String localHostName() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            return "unknown";
        }
    }
}
