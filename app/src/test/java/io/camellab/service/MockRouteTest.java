package io.camellab.service;

import static com.github.tomakehurst.wiremock.client.WireMock.aResponse;
import static com.github.tomakehurst.wiremock.client.WireMock.get;
import static com.github.tomakehurst.wiremock.client.WireMock.getRequestedFor;
import static com.github.tomakehurst.wiremock.client.WireMock.urlEqualTo;
import static com.github.tomakehurst.wiremock.core.WireMockConfiguration.wireMockConfig;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.github.tomakehurst.wiremock.WireMockServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.actuate.autoconfigure.web.server.LocalManagementPort;
import org.springframework.boot.test.autoconfigure.actuate.metrics.AutoConfigureMetrics;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.client.TestRestTemplate;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

// Camel registers its servlet JVM-wide: one live application context at a time.
@DirtiesContext
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
@ExtendWith(OutputCaptureExtension.class)
@AutoConfigureMetrics
class MockRouteTest {

    private static final int SOCKET_TIMEOUT_MS = 500;
    private static final WireMockServer backend = new WireMockServer(wireMockConfig().dynamicPort());

    @Autowired
    private TestRestTemplate http;

    @Autowired
    private ObjectMapper mapper;

    @LocalManagementPort
    private int managementPort;

    @DynamicPropertySource
    static void backendProperties(DynamicPropertyRegistry registry) {
        backend.start();
        registry.add("lab.backend.url", () -> "http://127.0.0.1:" + backend.port() + "/data");
        registry.add("camel.component.http.socket-timeout", () -> SOCKET_TIMEOUT_MS);
        registry.add("camel.component.http.connections-per-route", () -> 37);
        registry.add("camel.component.http.max-total-connections", () -> 41);
        registry.add("lab.node-name", () -> "test-node");
        registry.add("management.server.port", () -> 0);
    }

    @AfterAll
    static void stopBackend() {
        backend.stop();
    }

    @BeforeEach
    void resetBackend() {
        backend.resetAll();
    }

    @Test
    void composesTheBackendDataIntoTheReplyAndAuditsBoth(CapturedOutput output) throws Exception {
        backend.stubFor(get("/data").willReturn(aResponse().withStatus(200)
                .withHeader("Content-Type", "application/json").withBody("{\"records\":[{\"id\":1},{\"id\":2}]}")));

        ResponseEntity<String> response = http.getForEntity("/camel/mock?customer=42", String.class);

        assertThat(response.getStatusCodeValue()).isEqualTo(200);
        assertThat(response.getHeaders().getContentType()).isEqualTo(MediaType.APPLICATION_JSON);
        JsonNode reply = mapper.readTree(response.getBody());
        String transactionId = reply.get("transactionId").asText();
        assertThat(transactionId).matches("[0-9a-f-]{36}");
        assertThat(reply.get("node").asText()).isEqualTo("test-node");
        assertThat(reply.get("backendStatus").asInt()).isEqualTo(200);
        assertThat(reply.at("/data/records/1/id").asInt()).isEqualTo(2);
        assertThat(reply.get("receivedAt").asText()).isLessThanOrEqualTo(reply.get("repliedAt").asText());
        // A plain GET to exactly the configured URL: no servlet path or query leaked into it.
        backend.verify(1, getRequestedFor(urlEqualTo("/data")));
        assertThat(output).contains("request txId=" + transactionId, "query=customer=42")
                .contains("reply txId=" + transactionId + " status=200 body={\"transactionId\":\"" + transactionId);
        // The audit knobs are off by default: no headers, no backend line, the reply on one line.
        assertThat(output).doesNotContain("headers=", "backend txId=" + transactionId, "body={\n");
    }

    @Test
    void aBackendErrorBecomesA502WithTheBackendStatus(CapturedOutput output) throws Exception {
        backend.stubFor(get("/data").willReturn(aResponse().withStatus(500).withBody("boom")));

        ResponseEntity<String> response = http.getForEntity("/camel/mock", String.class);

        assertThat(response.getStatusCodeValue()).isEqualTo(502);
        JsonNode reply = mapper.readTree(response.getBody());
        assertThat(reply.get("status").asInt()).isEqualTo(502);
        assertThat(reply.get("backendStatus").asInt()).isEqualTo(500);
        assertThat(reply.get("error").asText()).isEqualTo("backend replied with HTTP 500");
        assertThat(response.getBody()).doesNotContain("Exception", "\tat ");
        assertThat(output).contains("reply txId=" + reply.get("transactionId").asText() + " status=502");
    }

    @Test
    void aBackendSlowerThanTheSocketTimeoutBecomesA504() throws Exception {
        backend.stubFor(get("/data").willReturn(aResponse().withStatus(200).withBody("{}")
                .withFixedDelay(SOCKET_TIMEOUT_MS * 4)));

        long start = System.nanoTime();
        ResponseEntity<String> response = http.getForEntity("/camel/mock", String.class);
        long elapsedMs = (System.nanoTime() - start) / 1_000_000;

        assertThat(response.getStatusCodeValue()).isEqualTo(504);
        JsonNode reply = mapper.readTree(response.getBody());
        assertThat(reply.get("error").asText()).startsWith("backend timed out");
        // Answered when the timeout fired, not when the backend finally replied.
        assertThat(elapsedMs).isLessThan(SOCKET_TIMEOUT_MS * 3L);
    }

    @Test
    void prometheusExposesTomcatPoolAndCamelMetrics() {
        backend.stubFor(get("/data").willReturn(aResponse().withStatus(200).withBody("{}")));
        http.getForEntity("/camel/mock", String.class);
        // Meters must survive a GC: Micrometer holds what they read only weakly.
        System.gc();

        String url = "http://127.0.0.1:" + managementPort + "/actuator/prometheus";
        // Camel counts the exchange just after the reply is on the wire.
        String metrics = await().atMost(Duration.ofSeconds(5)).until(() -> http.getRestTemplate().getForObject(url, String.class),
                text -> Pattern.compile("camel_exchanges_total\\{route=\"mock\",\\} [1-9]").matcher(text).find());

        assertThat(metrics).contains("tomcat_threads_busy_threads", "tomcat_connections_current_connections",
                "httpcomponents_httpclient_pool_total_pending", "jvm_gc_pause_seconds");
        assertThat(metrics).containsPattern("httpcomponents_httpclient_pool_total_connections\\{endpoint=\"http://127.0.0.1:"
                + backend.port() + "/data\",httpclient=\"camel-http\",state=\"available\",\\} [0-9]");
        assertThat(metrics).contains("camel_exchanges_inflight{route=\"mock\",} 0.0", "camel_exchanges_failed_total{route=\"mock\",} 0.0");
    }

    @Test
    void infoShowsTheBackendPoolTheLiveComponentHas() throws Exception {
        String url = "http://127.0.0.1:" + managementPort + "/actuator/info";
        JsonNode backendInfo = mapper.readTree(http.getRestTemplate().getForObject(url, String.class)).path("backend");
        assertThat(backendInfo.path("url").asText()).isEqualTo("http://127.0.0.1:" + backend.port() + "/data");
        assertThat(backendInfo.path("connectionsPerRoute").asInt()).isEqualTo(37);
        assertThat(backendInfo.path("maxTotalConnections").asInt()).isEqualTo(41);
    }
}
