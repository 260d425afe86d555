package io.camellab.service;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The shared route, composer and auditor on Spring Boot 4, Camel 4, Tomcat 11 and HttpClient 5. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT,
        properties = {"management.server.port=0", "lab.node-name=test-node", "management.prometheus.metrics.export.enabled=true"})
@ExtendWith(OutputCaptureExtension.class)
class ModernServiceTest {

    private static final int RESPONSE_TIMEOUT_MS = 500;
    private static final Backend backend = Backend.started();
    private static final HttpClient client = HttpClient.newHttpClient();
    private static final ObjectMapper mapper = new ObjectMapper();

    @Value("${local.server.port}")
    private int port;

    @Value("${local.management.port}")
    private int managementPort;

    @DynamicPropertySource
    static void backendProperties(DynamicPropertyRegistry registry) {
        registry.add("lab.backend.url", backend::url);
        registry.add("camel.component.http.response-timeout", () -> RESPONSE_TIMEOUT_MS);
        // One connection, and 200 ms to wait for it: a second concurrent call finds the pool exhausted.
        registry.add("camel.component.http.connections-per-route", () -> 1);
        registry.add("camel.component.http.max-total-connections", () -> 1);
        registry.add("camel.component.http.connection-request-timeout", () -> 200);
    }

    @AfterAll
    static void stopBackend() {
        backend.close();
    }

    private HttpResponse<String> get(int port, String path) throws Exception {
        return client.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    @Test
    void composesTheBackendDataIntoTheReplyAndAuditsBoth(CapturedOutput output) throws Exception {
        backend.answer(200, "{\"records\":[{\"id\":1},{\"id\":2}]}", 0);

        HttpResponse<String> response = get(port, "/camel/mock?customer=42");

        assertThat(response.statusCode()).isEqualTo(200);
        assertThat(response.headers().firstValue("Content-Type")).hasValue("application/json");
        JsonNode reply = mapper.readTree(response.body());
        String transactionId = reply.get("transactionId").asText();
        assertThat(reply.get("node").asText()).isEqualTo("test-node");
        assertThat(reply.at("/data/records/1/id").asInt()).isEqualTo(2);
        assertThat(output).contains("request txId=" + transactionId, "query=customer=42",
                "reply txId=" + transactionId + " status=200");
    }

    @Test
    void aBackendSlowerThanTheResponseTimeoutBecomesA504() throws Exception {
        backend.answer(200, "{}", RESPONSE_TIMEOUT_MS * 4L);

        HttpResponse<String> response = get(port, "/camel/mock");

        assertThat(response.statusCode()).isEqualTo(504);
        assertThat(mapper.readTree(response.body()).get("error").asText()).startsWith("backend timed out");
    }

    @Test
    void aCallThatFindsNoFreeBackendConnectionBecomesA503() throws Exception {
        backend.answer(200, "{}", 1500);

        List<CompletableFuture<HttpResponse<String>>> calls = List.of(
                client.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/camel/mock")).build(),
                        HttpResponse.BodyHandlers.ofString()),
                client.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/camel/mock")).build(),
                        HttpResponse.BodyHandlers.ofString()));

        List<Integer> statuses = calls.stream().map(CompletableFuture::join).map(HttpResponse::statusCode).toList();
        // The one connection is held past the response timeout (504); the other call never got it (503).
        assertThat(statuses).containsExactlyInAnyOrder(504, 503);
    }

    @Test
    void theInfoEndpointNamesTheStackThatServes() throws Exception {
        JsonNode info = mapper.readTree(get(managementPort, "/actuator/info").body());

        assertThat(info.at("/stack/name").asText()).isEqualTo("modern");
        assertThat(info.at("/stack/springBoot").asText()).startsWith("4.0.");
        assertThat(info.at("/stack/camel").asText()).startsWith("4.");
        assertThat(info.at("/stack/tomcat").asText()).startsWith("11.0.");
        assertThat(info.at("/stack/java").asText()).isEqualTo(Runtime.version().toString());
        assertThat(info.at("/stack/virtualThreads").asBoolean(true)).isFalse();
        // Without virtual threads, platform-http's route runs on Boot's task pool: 8 threads unless set.
        assertThat(info.at("/stack/routeExecutor/executor").asText()).endsWith("ThreadPoolTaskExecutor");
        assertThat(info.at("/stack/routeExecutor/corePoolSize").asInt()).isEqualTo(8);
        assertThat(info.at("/tomcat/connectors/0/executor").asText()).isEqualTo("org.apache.tomcat.util.threads.ThreadPoolExecutor");
        assertThat(info.at("/backend/url").asText()).isEqualTo(backend.url());
        assertThat(info.at("/backend/connectionsPerRoute").asInt()).isEqualTo(1);
    }

    @Test
    void prometheusExposesTomcatPoolAndCamelMetrics() throws Exception {
        backend.answer(200, "{}", 0);
        get(port, "/camel/mock");
        System.gc();

        String metrics = await().atMost(Duration.ofSeconds(5)).until(() -> get(managementPort, "/actuator/prometheus").body(),
                text -> text.matches("(?s).*camel_exchanges_total\\{route=\"mock\"} [1-9].*"));

        assertThat(metrics).contains("tomcat_threads_busy_threads", "tomcat_connections_current_connections",
                "httpcomponents_httpclient_pool_total_pending", "jvm_gc_pause_seconds",
                "httpcomponents_httpclient_pool_total_connections{endpoint=\"" + backend.url() + "\",httpclient=\"camel-http\",state=\"available\"}",
                "camel_exchanges_failed_total{route=\"mock\"}");
    }
}
