/*
 * A Delta Lake LogStore for S3 (s3a://) that commits with S3's conditional PUT (If-None-Match: *).
 *
 * Delta needs "create the commit file N.json only if it does not exist" to be atomic. S3 has had that
 * since 2024 (conditional writes), and delta-rs 1.x commits exactly that way; delta-spark 4.4 ships no
 * LogStore that uses it (S3SingleDriverLogStore checks for the file, then PUTs unconditionally, so it is
 * safe within one driver only; S3DynamoDBLogStore coordinates through DynamoDB, which delta-rs 1.x no
 * longer speaks). Hadoop 3.5's S3A connector sends the conditional PUT when a file is created with the
 * builder option fs.option.create.conditional.overwrite; this LogStore asks for it and turns the store's
 * "412 Precondition Failed" into java.nio.file.FileAlreadyExistsException, which Delta's optimistic
 * transaction treats as a concurrent commit (it re-reads the log, checks for conflicts, and retries).
 *
 * With it, every delta-spark driver and every delta-rs process that writes one table coordinates through
 * the object store itself: no lock table, no single-driver restriction.
 *
 * Use: spark.delta.logStore.s3a.impl=io.upsertsink.delta.S3ConditionalPutLogStore (and .s3.impl when
 * s3:// is mapped to S3A). Built and located by upsertsink.jars (python -m upsertsink.jars ensure --s3a).
 */
package io.upsertsink.delta;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathIOException;

public class S3ConditionalPutLogStore extends HadoopFileSystemLogStore {

    /** Hadoop's createFile() option that makes S3A send If-None-Match: * (Hadoop 3.4.2 and later). */
    public static final String CONDITIONAL_CREATE = "fs.option.create.conditional.overwrite";

    public S3ConditionalPutLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (overwrite) {
            try (FSDataOutputStream out = fs.create(path, true)) {
                writeLines(out, actions);
            }
            return;
        }
        if (!fs.hasPathCapability(path, CONDITIONAL_CREATE)) {
            throw new IOException(
                "S3ConditionalPutLogStore needs conditional writes, which " + fs.getUri()
                    + " does not offer (S3A of Hadoop 3.4.2 or later with fs.s3a.create.conditional.enabled"
                    + " left at true)");
        }
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path);
        builder.overwrite(false);
        builder.must(CONDITIONAL_CREATE, true);
        FSDataOutputStream out = builder.build();
        try {
            // The PUT happens when the stream is closed: that is where a lost race shows up.
            try {
                writeLines(out, actions);
            } finally {
                out.close();
            }
        } catch (InterruptedIOException e) {
            throw e;
        } catch (org.apache.hadoop.fs.FileAlreadyExistsException e) {
            throw alreadyExists(path, e);
        } catch (PathIOException e) {
            // S3A reports 412 Precondition Failed as RemoteFileChangedException (a PathIOException).
            if (isPreconditionFailure(e)) {
                throw alreadyExists(path, e);
            }
            throw e;
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false; // an S3 PUT is all or nothing
    }

    private static void writeLines(FSDataOutputStream out, Iterator<String> actions) throws IOException {
        while (actions.hasNext()) {
            out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    private static boolean isPreconditionFailure(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t.getClass().getSimpleName().equals("RemoteFileChangedException")) {
                return true;
            }
            String text = String.valueOf(t.getMessage());
            if (text.contains("412") || text.contains("PreconditionFailed")
                    || text.contains("Precondition Failed")) {
                return true;
            }
        }
        return false;
    }

    private static FileAlreadyExistsException alreadyExists(Path path, Exception cause) {
        FileAlreadyExistsException e = new FileAlreadyExistsException(path.toString());
        e.initCause(cause);
        return e;
    }
}
