package staticfleet.analytics;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.catalyst.expressions.XXH64;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One event-log line as the analysis reads it: the fields of `fields.tsv` (name and kind per line, in
 * the order of the schema), the line itself where it is not one this parser takes, and a completed
 * rebalance's members as the analysis keys them: for each, the 64-bit hash of its owner (instance id,
 * else member id) and a key per partition, the hash of the topic plus the partition, hashed as Spark's
 * `xxhash64` does.
 *
 * <p>It takes only a line that Spark's JSON reader would read to exactly the same values: one JSON
 * object and nothing after it, each known field once, a string field a string (or, as the reader copies
 * it, an integer, array or object as its text), an int or long field an integer in range, a boolean
 * field true or false, any field null; a completed rebalance's member list an array of objects whose ids
 * are strings or null and whose assignment, if any, maps each topic once to integers. Any other line is
 * returned with only its text, so that the caller can read the input again with Spark's reader.
 */
public final class StrictEventLines implements UDF1<String, Row> {
    private static final JsonFactory JSON = JsonFactory.builder().build();
    private static final String[] NAMES;
    private static final char[] KINDS;
    private static final Map<String, Integer> INDEX = new HashMap<>();
    private static final String REBALANCE_COMPLETED = "rebalance_completed";
    private static final long SPARK_HASH_SEED = 42L;

    static {
        List<String> names = new ArrayList<>();
        StringBuilder kinds = new StringBuilder();
        try (InputStream in = StrictEventLines.class.getResourceAsStream("fields.tsv");
             BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = reader.readLine()) != null) {
                String[] parts = line.split("\t");
                names.add(parts[0]);
                kinds.append(parts[1].charAt(0));
            }
        } catch (IOException e) {
            throw new IllegalStateException("fields.tsv unreadable", e);
        }
        NAMES = names.toArray(new String[0]);
        KINDS = kinds.toString().toCharArray();
        for (int i = 0; i < NAMES.length; i++) {
            INDEX.put(NAMES[i], i);
        }
    }

    @Override
    public Row call(String line) {
        Object[] row = new Object[NAMES.length + 2];
        if (line == null || !parse(line, row) || !keyMembers(row)) {
            java.util.Arrays.fill(row, null);
            row[NAMES.length] = line;
        }
        return RowFactory.create(row);
    }

    private static boolean parse(String line, Object[] row) {
        // A replacement character may stand for bytes that are not UTF-8, which Spark's reader rejects.
        if (line.indexOf('\uFFFD') >= 0) {
            return false;
        }
        boolean[] seen = new boolean[NAMES.length];
        try (JsonParser parser = JSON.createParser(line)) {
            if (parser.nextToken() != JsonToken.START_OBJECT) {
                return false;
            }
            JsonToken token;
            while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
                Integer index = INDEX.get(parser.currentName());
                token = parser.nextToken();
                if (index == null) {
                    parser.skipChildren();
                    continue;
                }
                if (seen[index]) {
                    return false;
                }
                seen[index] = true;
                if (token == JsonToken.VALUE_NULL) {
                    continue;
                }
                Object value = value(parser, token, KINDS[index], line);
                if (value == null) {
                    return false;
                }
                row[index] = value;
            }
            return token == JsonToken.END_OBJECT && parser.nextToken() == null;
        } catch (JsonProcessingException e) {
            return false;
        } catch (IOException e) {
            return false;
        }
    }

    /** A completed rebalance's members keyed into the last field; false where the list is not taken. */
    private static boolean keyMembers(Object[] row) {
        Integer type = INDEX.get("type");
        Integer members = INDEX.get("members");
        if (type == null || members == null || !REBALANCE_COMPLETED.equals(row[type]) || row[members] == null) {
            return true;
        }
        try (JsonParser parser = JSON.createParser((String) row[members])) {
            List<Row> keyed = keyed(parser);
            row[NAMES.length + 1] = keyed;
            return keyed != null && parser.nextToken() == null;
        } catch (IOException e) {
            return false;
        }
    }

    private static List<Row> keyed(JsonParser parser) throws IOException {
        if (parser.nextToken() != JsonToken.START_ARRAY) {
            return null;
        }
        List<Row> out = new ArrayList<>();
        JsonToken token;
        while ((token = parser.nextToken()) == JsonToken.START_OBJECT) {
            String memberId = null;
            String instanceId = null;
            List<Long> keys = null;
            Set<String> fields = new HashSet<>();
            while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
                String name = parser.currentName();
                token = parser.nextToken();
                boolean known = name.equals("member_id") || name.equals("instance_id") || name.equals("assignment");
                if (!known) {
                    parser.skipChildren();
                    continue;
                }
                if (!fields.add(name)) {
                    return null;
                }
                if (token == JsonToken.VALUE_NULL) {
                    continue;
                }
                if (name.equals("assignment")) {
                    keys = partitionKeys(parser, token);
                    if (keys == null) {
                        return null;
                    }
                } else if (token != JsonToken.VALUE_STRING) {
                    return null;
                } else if (name.equals("member_id")) {
                    memberId = parser.getText();
                } else {
                    instanceId = parser.getText();
                }
            }
            if (token != JsonToken.END_OBJECT) {
                return null;
            }
            String owner = instanceId != null ? instanceId : memberId;
            out.add(RowFactory.create(owner == null ? SPARK_HASH_SEED : hash(owner), keys));
        }
        return token == JsonToken.END_ARRAY ? out : null;
    }

    private static List<Long> partitionKeys(JsonParser parser, JsonToken token) throws IOException {
        if (token != JsonToken.START_OBJECT) {
            return null;
        }
        List<Long> keys = new ArrayList<>();
        Set<String> topics = new HashSet<>();
        while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
            String topic = parser.currentName();
            if (!topics.add(topic) || parser.nextToken() != JsonToken.START_ARRAY) {
                return null;
            }
            long topicHash = hash(topic);
            while ((token = parser.nextToken()) != JsonToken.END_ARRAY) {
                if (token != JsonToken.VALUE_NUMBER_INT || parser.getNumberType() != JsonParser.NumberType.INT) {
                    return null;
                }
                keys.add(topicHash + parser.getIntValue());
            }
        }
        return token == JsonToken.END_OBJECT ? keys : null;
    }

    private static long hash(String text) {
        UTF8String utf8 = UTF8String.fromString(text);
        return XXH64.hashUnsafeBytes(utf8.getBaseObject(), utf8.getBaseOffset(), utf8.numBytes(), SPARK_HASH_SEED);
    }

    /** The field's value as Spark's reader would give it, or null where this parser does not take it. */
    private static Object value(JsonParser parser, JsonToken token, char kind, String line) throws IOException {
        switch (kind) {
            case 's':
                if (token == JsonToken.VALUE_STRING) {
                    return parser.getText();
                }
                if (token == JsonToken.VALUE_NUMBER_INT) {
                    return parser.getText();
                }
                if (token == JsonToken.START_ARRAY || token == JsonToken.START_OBJECT) {
                    int start = (int) parser.currentTokenLocation().getCharOffset();
                    parser.skipChildren();
                    int end = (int) parser.currentLocation().getCharOffset();
                    return line.substring(start, end);
                }
                return null;
            case 'i':
                if (token == JsonToken.VALUE_NUMBER_INT && parser.getNumberType() == JsonParser.NumberType.INT) {
                    return parser.getIntValue();
                }
                return null;
            case 'l':
                if (token == JsonToken.VALUE_NUMBER_INT && parser.getNumberType() != JsonParser.NumberType.BIG_INTEGER) {
                    return parser.getLongValue();
                }
                return null;
            case 'b':
                if (token == JsonToken.VALUE_TRUE || token == JsonToken.VALUE_FALSE) {
                    return token == JsonToken.VALUE_TRUE;
                }
                return null;
            default:
                return null;
        }
    }
}
