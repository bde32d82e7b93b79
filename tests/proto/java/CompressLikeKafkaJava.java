// Compresses one file the way the Java Kafka client's codecs do, for tests/proto:
// gzip with java.util.zip.GZIPOutputStream, snappy with snappy-java's SnappyOutputStream
// (xerial framing), zstd with zstd-jni's ZstdOutputStream, lz4 with lz4-java's
// LZ4FrameOutputStream (the frame format; Kafka's own KafkaLZ4BlockOutputStream is not on
// this classpath). Usage: java -cp <jars> CompressLikeKafkaJava.java <input> <output dir>
import com.github.luben.zstd.ZstdOutputStream;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPOutputStream;
import net.jpountz.lz4.LZ4FrameOutputStream;
import org.xerial.snappy.SnappyOutputStream;

public class CompressLikeKafkaJava {
    interface Wrapper {
        OutputStream wrap(OutputStream out) throws Exception;
    }

    static void write(byte[] input, Path target, Wrapper wrapper) throws Exception {
        ByteArrayOutputStream sink = new ByteArrayOutputStream();
        try (OutputStream out = wrapper.wrap(sink)) {
            out.write(input);
        }
        Files.write(target, sink.toByteArray());
    }

    public static void main(String[] args) throws Exception {
        byte[] input = Files.readAllBytes(Path.of(args[0]));
        Path dir = Path.of(args[1]);
        write(input, dir.resolve("gzip"), out -> new GZIPOutputStream(out, 8 * 1024));
        write(input, dir.resolve("snappy"), SnappyOutputStream::new);
        write(input, dir.resolve("zstd"), ZstdOutputStream::new);
        write(input, dir.resolve("lz4"), LZ4FrameOutputStream::new);
    }
}
