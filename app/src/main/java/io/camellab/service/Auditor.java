package io.camellab.service;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.camel.Exchange;
import org.apache.camel.Message;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.stereotype.Component;

/** The audit logger's lines for every request, as verbose as AuditProperties asks. */
@Component
public class Auditor {

    static final String LOGGER = "audit";
    private static final Logger AUDIT = LoggerFactory.getLogger(LOGGER);

    private final AuditProperties properties;
    private final ObjectMapper mapper;

    public Auditor(AuditProperties properties, ObjectMapper mapper) {
        this.properties = properties;
        this.mapper = mapper;
    }

    public void request(Exchange exchange) {
        Message message = exchange.getMessage();
        StringBuilder line = new StringBuilder("request txId=").append(transactionId(exchange))
                .append(" method=").append(message.getHeader(Exchange.HTTP_METHOD))
                .append(" uri=").append(message.getHeader(Exchange.HTTP_URI))
                .append(" query=").append(message.getHeader(Exchange.HTTP_QUERY));
        if (properties.isHeaders()) {
            // The client's HTTP headers; Camel's own (Camel*) are not the request's.
            Map<String, Object> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
            message.getHeaders().forEach((name, value) -> {
                if (!name.startsWith("Camel")) {
                    headers.put(name, value);
                }
            });
            line.append(" headers=").append(headers);
        }
        AUDIT.info(line.toString());
    }

    /** After the backend answered: its whole body, when asked (read once into bytes, so it can be read again). */
    public void backend(Exchange exchange) {
        if (!properties.isBackendBody()) {
            return;
        }
        Message message = exchange.getMessage();
        byte[] body = message.getBody(byte[].class);
        message.setBody(body);
        AUDIT.info("backend txId={} status={} body={}", transactionId(exchange),
                message.getHeader(Exchange.HTTP_RESPONSE_CODE), body == null ? "" : new String(body, StandardCharsets.UTF_8));
    }

    public void reply(Exchange exchange) {
        Message message = exchange.getMessage();
        String body = message.getBody(String.class);
        AUDIT.info("reply txId={} status={} body={}", transactionId(exchange),
                message.getHeader(Exchange.HTTP_RESPONSE_CODE), properties.isPrettyReply() ? pretty(body) : body);
    }

    private String pretty(String body) {
        try {
            return mapper.writerWithDefaultPrettyPrinter().writeValueAsString(mapper.readTree(body));
        } catch (IOException | RuntimeException notJson) {
            return body;
        }
    }

    private static Object transactionId(Exchange exchange) {
        return exchange.getProperty(ReplyComposer.TRANSACTION_ID);
    }
}
