package io.camellab.service;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.boot.test.web.client.TestRestTemplate;
import org.springframework.http.ResponseEntity;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

// Camel registers its servlet JVM-wide: one live application context at a time.
@DirtiesContext
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = "management.server.port=0")
class BackendDownTest {

    @Autowired
    private TestRestTemplate http;

    @Autowired
    private ObjectMapper mapper;

    // A port bound but never listening, held for the whole class: connecting to it is refused, and neither the
    // context's own random ports nor anything else can take it (a port closed again at once was once given to this
    // context's Tomcat, which answered the backend call with its own 404).
    private static Socket closed;

    @DynamicPropertySource
    static void backendProperties(DynamicPropertyRegistry registry) throws IOException {
        closed = new Socket();
        closed.bind(new InetSocketAddress("127.0.0.1", 0));
        int closedPort = closed.getLocalPort();
        registry.add("lab.backend.url", () -> "http://127.0.0.1:" + closedPort + "/data");
    }

    @AfterAll
    static void release() throws IOException {
        closed.close();
    }

    @Test
    void anUnreachableBackendBecomesA502() throws Exception {
        ResponseEntity<String> response = http.getForEntity("/camel/mock", String.class);

        assertThat(response.getStatusCodeValue()).isEqualTo(502);
        JsonNode reply = mapper.readTree(response.getBody());
        assertThat(reply.get("status").asInt()).isEqualTo(502);
        assertThat(reply.get("error").asText()).startsWith("backend unreachable").contains("Connection refused");
        assertThat(reply.has("transactionId")).isTrue();
    }
}
