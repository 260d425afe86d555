package io.camellab.service;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.Socket;

/** Both stacks' tests: whether a port really speaks AJP13. */
final class AjpProbe {

    private AjpProbe() {
    }

    /** The reply to a CPing (0x0A): an AJP connector answers CPong (0x09), "AB" 0x0001 0x09. */
    static byte[] cping(int port) throws IOException {
        try (Socket socket = new Socket("127.0.0.1", port)) {
            socket.setSoTimeout(5000);
            OutputStream out = socket.getOutputStream();
            out.write(new byte[] {0x12, 0x34, 0x00, 0x01, 0x0A});
            out.flush();
            byte[] reply = new byte[5];
            new DataInputStream(socket.getInputStream()).readFully(reply);
            return reply;
        }
    }
}
