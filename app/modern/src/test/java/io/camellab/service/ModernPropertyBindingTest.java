package io.camellab.service;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.validation.autoconfigure.ValidationAutoConfiguration;
import org.springframework.context.annotation.Configuration;

/** lab.ajp.* on the modern stack: NIO2 binds; APR, a classic-only knob, is refused naming itself. */
class ModernPropertyBindingTest {

    @Configuration(proxyBeanMethods = false)
    @EnableConfigurationProperties(AjpProperties.class)
    static class Binding {
    }

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ValidationAutoConfiguration.class))
            .withUserConfiguration(Binding.class);

    @Test
    void bindsNio2() {
        runner.withPropertyValues("lab.ajp.protocol=nio2").run(context ->
                assertThat(context.getBean(AjpProperties.class).getProtocol()).isEqualTo(AjpProperties.Protocol.NIO2));
    }

    @Test
    void aprIsRefusedNamingThePropertyAndTheValue() {
        runner.withPropertyValues("lab.ajp.protocol=APR").run(context -> {
            assertThat(context).hasFailed();
            StringBuilder messages = new StringBuilder();
            for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
                messages.append(t.getMessage()).append('\n');
            }
            assertThat(messages.toString()).contains("lab.ajp.protocol", "APR");
        });
    }

    @Test
    void ajpWithoutASecretIsRefused() {
        runner.withPropertyValues("lab.ajp.enabled=true").run(context -> {
            assertThat(context).hasFailed();
            assertThat(context.getStartupFailure()).rootCause().hasMessageContaining("lab.ajp.secret must be set");
        });
    }
}
