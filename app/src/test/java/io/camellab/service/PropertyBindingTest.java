package io.camellab.service;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.validation.ValidationAutoConfiguration;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;

class PropertyBindingTest {

    @Configuration(proxyBeanMethods = false)
    @EnableConfigurationProperties(AjpProperties.class)
    static class Binding {
    }

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ValidationAutoConfiguration.class))
            .withUserConfiguration(Binding.class);

    @Test
    void bindsEveryAjpKnob() {
        runner.withPropertyValues("lab.ajp.enabled=true", "lab.ajp.port=8010", "lab.ajp.address=0.0.0.0",
                "lab.ajp.secret=s3cret", "lab.ajp.protocol=apr", "lab.ajp.max-threads=300",
                "lab.ajp.min-spare-threads=300", "lab.ajp.max-connections=400", "lab.ajp.accept-count=100",
                "lab.ajp.connection-timeout=30000ms").run(context -> {
                    AjpProperties ajp = context.getBean(AjpProperties.class);
                    assertThat(ajp.isEnabled()).isTrue();
                    assertThat(ajp.getPort()).isEqualTo(8010);
                    assertThat(ajp.getAddress()).isEqualTo("0.0.0.0");
                    assertThat(ajp.getSecret()).isEqualTo("s3cret");
                    assertThat(ajp.getProtocol()).isEqualTo(AjpProperties.Protocol.APR);
                    assertThat(ajp.getMaxThreads()).isEqualTo(300);
                    assertThat(ajp.getMinSpareThreads()).isEqualTo(300);
                    assertThat(ajp.getMaxConnections()).isEqualTo(400);
                    assertThat(ajp.getAcceptCount()).isEqualTo(100);
                    assertThat(ajp.getConnectionTimeout()).hasSeconds(30);
                });
    }

    @Test
    void defaultsLeaveAjpOffOnTomcatsPort() {
        runner.run(context -> {
            AjpProperties ajp = context.getBean(AjpProperties.class);
            assertThat(ajp.isEnabled()).isFalse();
            assertThat(ajp.getPort()).isEqualTo(8009);
            assertThat(ajp.getProtocol()).isEqualTo(AjpProperties.Protocol.NIO);
            assertThat(ajp.getMaxThreads()).isNull();
            assertThat(ajp.getConnectionTimeout()).isNull();
        });
    }

    @Test
    void anUnknownProtocolNamesThePropertyAndTheValue() {
        runner.withPropertyValues("lab.ajp.protocol=BOGUS").run(context -> {
            assertThat(context).hasFailed();
            assertThat(report(context.getStartupFailure())).contains("lab.ajp.protocol", "BOGUS");
        });
    }

    @Test
    void aPortOutOfRangeIsRefused() {
        runner.withPropertyValues("lab.ajp.port=70000").run(context -> {
            assertThat(context).hasFailed();
            assertThat(report(context.getStartupFailure())).contains("lab.ajp.port", "70000");
        });
    }

    @Test
    void ajpWithoutASecretIsRefused() {
        runner.withPropertyValues("lab.ajp.enabled=true").run(context -> {
            assertThat(context).hasFailed();
            assertThat(report(context.getStartupFailure())).contains("lab.ajp.secret must be set");
        });
    }

    /** Every message of the failure's cause chain: what Spring Boot's failure analysis reports from. */
    private static String report(Throwable failure) {
        StringBuilder messages = new StringBuilder();
        for (Throwable t = failure; t != null; t = t.getCause()) {
            messages.append(t.getMessage()).append('\n');
        }
        return messages.toString();
    }
}
