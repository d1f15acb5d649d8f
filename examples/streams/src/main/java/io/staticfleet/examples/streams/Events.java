package io.staticfleet.examples.streams;

import java.io.PrintStream;
import java.math.BigDecimal;
import java.util.Collection;
import java.util.Map;
import java.util.TreeMap;

/**
 * One JSON object per line on stdout, keys sorted, with {@code ts} (seconds, millisecond precision) and
 * {@code event}: the same shape as the example consumer's lines, so one parser reads both.
 */
final class Events {
    private static final PrintStream OUT = System.out;

    private Events() {
    }

    /** Logs {@code event} with fields given as name, value pairs. */
    static void log(String event, Object... fields) {
        if (fields.length % 2 != 0) {
            throw new IllegalArgumentException("fields come in name, value pairs");
        }
        Map<String, Object> record = new TreeMap<>();
        record.put("ts", BigDecimal.valueOf(System.currentTimeMillis(), 3));
        record.put("event", event);
        for (int i = 0; i < fields.length; i += 2) {
            record.put((String) fields[i], fields[i + 1]);
        }
        String line = json(record);
        synchronized (OUT) {
            OUT.println(line);
            OUT.flush();
        }
    }

    static String json(Object value) {
        StringBuilder out = new StringBuilder();
        write(out, value);
        return out.toString();
    }

    private static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Boolean || value instanceof Integer || value instanceof Long) {
            out.append(value);
        } else if (value instanceof BigDecimal number) {
            out.append(number.toPlainString());
        } else if (value instanceof Double number) {
            out.append(number.isNaN() || number.isInfinite() ? "null" : number.toString());
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : new TreeMap<>(map).entrySet()) {
                if (!first) {
                    out.append(", ");
                }
                first = false;
                string(out, String.valueOf(entry.getKey()));
                out.append(": ");
                write(out, entry.getValue());
            }
            out.append('}');
        } else if (value instanceof Collection<?> items) {
            out.append('[');
            boolean first = true;
            for (Object item : items) {
                if (!first) {
                    out.append(", ");
                }
                first = false;
                write(out, item);
            }
            out.append(']');
        } else {
            string(out, value.toString());
        }
    }

    private static void string(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
