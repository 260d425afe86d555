package io.camellab.service;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.ServerSocket;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
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

    @DynamicPropertySource
    static void backendProperties(DynamicPropertyRegistry registry) throws IOException {
        int closedPort;
        try (ServerSocket socket = new ServerSocket(0)) {
            closedPort = socket.getLocalPort();
        }
        registry.add("lab.backend.url", () -> "http://127.0.0.1:" + closedPort + "/data");
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
