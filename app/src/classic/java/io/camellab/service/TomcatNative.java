package io.camellab.service;

import org.apache.catalina.core.AprLifecycleListener;
import org.apache.catalina.core.AprStatus;
import org.apache.tomcat.jni.Library;

/**
 * The Tomcat Native (APR) library as this Tomcat sees it. Extends AprLifecycleListener only to read
 * the minimum version this Tomcat release demands, so the check can never drift from Tomcat's own.
 */
final class TomcatNative extends AprLifecycleListener {

    private TomcatNative() {
    }

    static String requiredVersion() {
        return TCN_REQUIRED_MAJOR + "." + TCN_REQUIRED_MINOR + "." + TCN_REQUIRED_PATCH;
    }

    /** The loaded library's version, or null when APR is not in use. */
    static String loadedVersion() {
        return AprStatus.isAprAvailable() ? libraryVersion() : null;
    }

    /**
     * Fails unless the library is loaded and new enough. Never lets the service fall back to NIO:
     * the tuned machine either runs APR or fails visibly. Spring Boot's Tomcat factory has already
     * tried to load the library (AprLifecycleListener.isAprAvailable) when this runs.
     */
    static void requireUsableLibrary() {
        boolean available = AprLifecycleListener.isAprAvailable();
        String found = Library.TCN_MAJOR_VERSION == 0 ? null : libraryVersion();
        // tcnative 2.x loads, but it dropped the APR socket code the AJP APR connector needs.
        if (available && Library.TCN_MAJOR_VERSION == TCN_REQUIRED_MAJOR) {
            return;
        }
        throw new TomcatNativeUnavailableException(found, requiredVersion(),
                System.getProperty("java.library.path"), System.mapLibraryName("tcnative-1"));
    }

    private static String libraryVersion() {
        return Library.TCN_MAJOR_VERSION + "." + Library.TCN_MINOR_VERSION + "." + Library.TCN_PATCH_VERSION;
    }
}
