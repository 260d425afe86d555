package io.camellab.service;

import static org.assertj.core.api.Assertions.assertThat;

import org.apache.tomcat.jni.Library;
import org.junit.jupiter.api.Test;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.test.annotation.DirtiesContext;

/** Loads the real libtcnative-1 built by native/build-tcnative (surefire sets java.library.path). */
// Camel registers its servlet JVM-wide: one live application context at a time.
@DirtiesContext
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT, properties = {
        "management.server.port=0", "lab.ajp.enabled=true", "lab.ajp.port=0", "lab.ajp.secret=test-secret",
        "lab.ajp.protocol=APR", "lab.ajp.max-threads=42", "lab.ajp.min-spare-threads=7",
        "lab.ajp.connection-timeout=30s"})
class AjpAprConnectorTest extends AjpConnectorTestSupport {

    @Override
    String expectedProtocol() {
        return TomcatConnectorConfiguration.AJP_APR;
    }

    @Test
    void theNativeLibraryIsLoadedAndNewEnoughForThisTomcat() {
        assertThat(TomcatNative.loadedVersion()).isNotNull();
        int loaded = Library.TCN_MAJOR_VERSION * 10000 + Library.TCN_MINOR_VERSION * 100 + Library.TCN_PATCH_VERSION;
        String[] required = TomcatNative.requiredVersion().split("\\.");
        int minimum = Integer.parseInt(required[0]) * 10000 + Integer.parseInt(required[1]) * 100 + Integer.parseInt(required[2]);
        assertThat(loaded).isGreaterThanOrEqualTo(minimum);
    }
}
