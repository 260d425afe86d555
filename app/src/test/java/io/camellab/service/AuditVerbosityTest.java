package io.camellab.service;

import static com.github.tomakehurst.wiremock.client.WireMock.aResponse;
import static com.github.tomakehurst.wiremock.client.WireMock.get;
import static com.github.tomakehurst.wiremock.core.WireMockConfiguration.wireMockConfig;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.github.tomakehurst.wiremock.WireMockServer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.client.TestRestTemplate;
import org.springframework.http.HttpEntity;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.ResponseEntity;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;

/** The write-up's audit workload, every knob on: headers, the backend's body, the reply pretty-printed, Camel's tracer. */
@DirtiesContext
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
        "lab.audit.headers=true", "lab.audit.backend-body=true", "lab.audit.pretty-reply=true",
        "camel.springboot.tracing=true", "management.server.port=0"})
@ExtendWith(OutputCaptureExtension.class)
class AuditVerbosityTest {

    private static final WireMockServer backend = new WireMockServer(wireMockConfig().dynamicPort());
    private static final String BACKEND_BODY = "{\"records\":[{\"id\":1,\"name\":\"first\"},{\"id\":2,\"name\":\"second\"}]}";

    @Autowired
    private TestRestTemplate http;

    @Autowired
    private ObjectMapper mapper;

    @DynamicPropertySource
    static void backendProperties(DynamicPropertyRegistry registry) {
        backend.start();
        registry.add("lab.backend.url", () -> "http://127.0.0.1:" + backend.port() + "/data");
    }

    @AfterAll
    static void stopBackend() {
        backend.stop();
    }

    @Test
    void everyAuditKnobAddsWhatItNames(CapturedOutput output) throws Exception {
        backend.stubFor(get("/data").willReturn(aResponse().withStatus(200)
                .withHeader("Content-Type", "application/json").withBody(BACKEND_BODY)));
        HttpHeaders headers = new HttpHeaders();
        headers.add("X-Audit-Probe", "probe-value");

        ResponseEntity<String> response = http.exchange("/camel/mock", HttpMethod.GET, new HttpEntity<>(headers), String.class);

        assertThat(response.getStatusCodeValue()).isEqualTo(200);
        String transactionId = mapper.readTree(response.getBody()).get("transactionId").asText();
        assertThat(output).containsPattern("request txId=" + transactionId + " .* headers=\\{.*(?i:x-audit-probe)=probe-value");
        assertThat(output).contains("backend txId=" + transactionId + " status=200 body=" + BACKEND_BODY);
        // pretty-printed: the reply's fields one per line, indented
        assertThat(output).contains("reply txId=" + transactionId + " status=200 body={\n  \"transactionId\" : \"" + transactionId);
        // Camel's tracer logs each step of the exchange: the route's input, then each processor
        assertThat(output).contains("Tracing is enabled", "---> [mock", "[bean[io.camellab.service.Auditor]]");
    }
}
