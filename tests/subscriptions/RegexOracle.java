import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.regex.Pattern;

/**
 * Ground truth for test_match_pattern_jdk.py: reads "pattern TAB value" lines (each part
 * base64 of its UTF-8) and prints 1 when Pattern.compile(pattern).matcher(value).matches()
 * (what Kafka's ClientMetricsInstanceMetadata asks), else 0.
 */
public class RegexOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Base64.Decoder decoder = Base64.getDecoder();
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t", -1);
            String pattern = new String(decoder.decode(parts[0]), StandardCharsets.UTF_8);
            String value = new String(decoder.decode(parts[1]), StandardCharsets.UTF_8);
            out.append(Pattern.compile(pattern).matcher(value).matches() ? '1' : '0').append('\n');
        }
        System.out.print(out);
    }
}
