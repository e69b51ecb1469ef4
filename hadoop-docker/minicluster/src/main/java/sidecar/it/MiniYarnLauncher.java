/*
 * Development/test launcher for a real YARN ResourceManager plus NodeManagers in one JVM
 * (docs/yarn.md section 9.4, "minimal Java alternative"). The RM is the real
 * ResourceManager with the CapacityScheduler and its REST webapp on a fixed port; the
 * NodeManagers are MiniYARNCluster's in-process NMs, which launch real container
 * processes through DefaultContainerExecutor. Not part of the sidecar.
 */
package sidecar.it;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapreduce.v2.MiniMRYarnCluster;
import org.apache.hadoop.minikdc.MiniKdc;
import org.apache.hadoop.mapreduce.v2.jobhistory.JHAdminConfig;
import org.apache.hadoop.yarn.api.records.NodeId;
import org.apache.hadoop.yarn.api.records.NodeLabel;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;
import org.apache.hadoop.yarn.server.resourcemanager.nodelabels.RMNodeLabelsManager;

public final class MiniYarnLauncher {

  private static final Pattern ACTIVE_NODES = Pattern.compile("\"activeNodes\"\\s*:\\s*(\\d+)");

  private MiniYarnLauncher() {
  }

  /** Command-line options; the `run` script is the user-facing interface. */
  private static final class Options {
    String host = "127.0.0.1";
    int port = 8088;
    int nodeManagers = 1;
    List<String> nodeLabels = new ArrayList<>();
    boolean jobHistory = false;
    File workDir = new File(".");
    int readyTimeoutSeconds = 180;
    boolean kerberos = false;
    boolean ha = false;
    Map<String, String> props = new LinkedHashMap<>();
  }

  /** The MiniKdc of a --kerberos run and what a client needs from it. */
  private static final class Kerberos {
    MiniKdc kdc;
    String realm;
    File krb5Conf;
    File clientKrb5Conf;
    File sidecarKeytab;
    String sidecarPrincipal;
  }

  public static void main(String[] args) {
    try {
      run(parse(args));
    } catch (Throwable t) {
      // Hadoop leaves non-daemon threads behind on a failed start: exit explicitly so callers
      // waiting for READY see the failure (the shutdown hook still stops what did start).
      t.printStackTrace();
      System.err.println("FAILED " + t);
      System.exit(1);
    }
  }

  private static void run(Options opts) throws Exception {
    File work = opts.workDir.getAbsoluteFile();
    File amConfDir = new File(work, "am-conf");
    if (!amConfDir.mkdirs() && !amConfDir.isDirectory()) {
      throw new IOException("cannot create " + amConfDir);
    }
    // The KDC starts first: it sets java.security.krb5.conf, which the RM's SPNEGO filter reads.
    Kerberos krb = opts.kerberos ? startKdc(work) : null;
    if (opts.ha) {
      if (krb != null || opts.jobHistory) {
        throw new IllegalArgumentException("--ha runs without --kerberos and --jobhistory");
      }
      HaCluster.run(opts.host, opts.port, opts.nodeManagers, work, opts.props,
          opts.readyTimeoutSeconds);
      return;
    }
    Configuration conf = buildConf(opts, work);
    if (krb != null) {
      File httpKeytab = new File(work, "kdc/http.keytab");
      krb.kdc.createPrincipal(httpKeytab, "HTTP/localhost", "HTTP/127.0.0.1");
      // Kerberos (SPNEGO) on every RM web endpoint, REST included; RPC stays simple.
      conf.set("hadoop.http.filter.initializers",
          "org.apache.hadoop.security.AuthenticationFilterInitializer");
      conf.set("hadoop.http.authentication.type", "kerberos");
      conf.set("hadoop.http.authentication.simple.anonymous.allowed", "false");
      conf.set("hadoop.http.authentication.kerberos.principal", "*");
      conf.set("hadoop.http.authentication.kerberos.keytab", httpKeytab.getAbsolutePath());
      conf.set("hadoop.http.authentication.kerberos.name.rules", "DEFAULT");
    }
    MiniYARNCluster cluster = opts.jobHistory
        ? new MiniMRYarnCluster("sidecar-it", opts.nodeManagers)
        : new MiniYARNCluster("sidecar-it", opts.nodeManagers, 1, 1);
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      // Stopping the NMs kills the container process trees, so no AM JVM outlives us.
      System.out.println("STOPPING");
      System.out.flush();
      cluster.stop();
      if (krb != null) {
        krb.kdc.stop();
      }
      stopped.countDown();
    }, "sidecar-it-shutdown"));
    cluster.init(conf);
    cluster.start();

    ResourceManager rm = cluster.getResourceManager();
    Configuration effective = rm.getConfig();
    if (!opts.nodeLabels.isEmpty()) {
      applyNodeLabels(cluster, rm, opts.nodeLabels, opts.nodeManagers);
    }
    String rmUrl = "http://" + opts.host + ":" + opts.port;
    writeConf(effective, new File(work, "effective-conf.xml"));
    // AMs read yarn-site.xml from their classpath to find the RM scheduler address.
    writeConf(effective, new File(amConfDir, "yarn-site.xml"));
    if (krb == null) {
      waitReady(rmUrl, opts.nodeManagers, opts.readyTimeoutSeconds);
    } else {
      waitReadyKerberized(rm, rmUrl, opts.nodeManagers, opts.readyTimeoutSeconds);
    }
    String jhsUrl = opts.jobHistory
        ? "http://" + cluster.getConfig().get(JHAdminConfig.MR_HISTORY_WEBAPP_ADDRESS) : null;
    writeDetails(new File(work, "cluster.json"), opts, rmUrl, jhsUrl, effective, amConfDir, krb);
    System.out.println("READY rm_url=" + rmUrl + " nodemanagers=" + opts.nodeManagers
        + " workdir=" + work + (jhsUrl == null ? "" : " jobhistory_url=" + jhsUrl));
    System.out.flush();
    stopped.await();
  }

  private static Options parse(String[] args) {
    Options o = new Options();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      switch (a) {
        case "--host" -> o.host = args[++i];
        case "--port" -> o.port = Integer.parseInt(args[++i]);
        case "--nodemanagers" -> o.nodeManagers = Integer.parseInt(args[++i]);
        case "--node-labels" -> o.nodeLabels = List.of(args[++i].split(",", -1));
        case "--jobhistory" -> o.jobHistory = true;
        case "--kerberos" -> o.kerberos = true;
        case "--ha" -> o.ha = true;
        case "--workdir" -> o.workDir = new File(args[++i]);
        case "--ready-timeout" -> o.readyTimeoutSeconds = Integer.parseInt(args[++i]);
        case "-D" -> putProp(o.props, args[++i]);
        default -> {
          if (a.startsWith("-D") && a.length() > 2) {
            putProp(o.props, a.substring(2));
          } else {
            throw new IllegalArgumentException("unknown argument: " + a);
          }
        }
      }
    }
    if (o.nodeManagers < 1) {
      throw new IllegalArgumentException("--nodemanagers must be >= 1");
    }
    return o;
  }

  private static void putProp(Map<String, String> props, String kv) {
    int eq = kv.indexOf('=');
    if (eq <= 0) {
      throw new IllegalArgumentException("expected key=value, got " + kv);
    }
    props.put(kv.substring(0, eq), kv.substring(eq + 1));
  }

  private static Configuration buildConf(Options o, File work) {
    // yarn-site.xml and capacity-scheduler.xml come from the conf dir first on the classpath.
    YarnConfiguration conf = new YarnConfiguration();
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, true);
    conf.set(YarnConfiguration.RM_WEBAPP_ADDRESS, o.host + ":" + o.port);
    // Only the REST port is fixed; RPC ports are ephemeral and published via am-conf.
    conf.set(YarnConfiguration.RM_ADDRESS, o.host + ":0");
    conf.set(YarnConfiguration.RM_SCHEDULER_ADDRESS, o.host + ":0");
    conf.set(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, o.host + ":0");
    conf.set(YarnConfiguration.RM_ADMIN_ADDRESS, o.host + ":0");
    conf.set("hadoop.tmp.dir", new File(work, "tmp").getAbsolutePath());
    conf.set(YarnConfiguration.FS_NODE_LABELS_STORE_ROOT_DIR,
        new File(work, "node-labels").toURI().toString());
    conf.set("yarn.scheduler.configuration.leveldb-store.path",
        new File(work, "confstore").getAbsolutePath());
    if (!o.nodeLabels.isEmpty()) {
      conf.setBoolean(YarnConfiguration.NODE_LABELS_ENABLED, true);
    }
    if (o.jobHistory) {
      // Without this MiniMRYarnCluster moves the JHS web UI to an ephemeral port.
      conf.setBoolean(JHAdminConfig.MR_HISTORY_MINICLUSTER_FIXED_PORTS, true);
      conf.set(JHAdminConfig.MR_HISTORY_WEBAPP_ADDRESS, o.host + ":" + (o.port + 11800));
      conf.set(JHAdminConfig.MR_HISTORY_ADDRESS, o.host + ":0");
      conf.set(JHAdminConfig.JHS_ADMIN_ADDRESS, o.host + ":0");
    }
    for (Map.Entry<String, String> e : o.props.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }
    return conf;
  }

  /** NM i gets labels.get(i) (empty = default partition); labels are non-exclusive. */
  private static void applyNodeLabels(MiniYARNCluster cluster, ResourceManager rm,
      List<String> labels, int nodeManagers) throws IOException {
    RMNodeLabelsManager mgr = rm.getRMContext().getNodeLabelManager();
    Set<NodeLabel> clusterLabels = new HashSet<>();
    Map<NodeId, Set<String>> mapping = new HashMap<>();
    int n = Math.min(labels.size(), nodeManagers);
    for (int i = 0; i < n; i++) {
      String label = labels.get(i).trim();
      if (label.isEmpty()) {
        continue;
      }
      clusterLabels.add(NodeLabel.newInstance(label, false));
      NodeId id = cluster.getNodeManager(i).getNMContext().getNodeId();
      mapping.put(id, Set.of(label));
    }
    mgr.addToCluserNodeLabels(clusterLabels);
    mgr.replaceLabelsOnNode(mapping);
  }

  static void writeConf(Configuration conf, File target) throws IOException {
    try (OutputStream out = new FileOutputStream(target)) {
      conf.writeXml(out);
    }
  }

  static void waitReady(String rmUrl, int nodes, int timeoutSeconds) throws Exception {
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    HttpRequest req = HttpRequest.newBuilder(URI.create(rmUrl + "/ws/v1/cluster/metrics"))
        .header("Accept", "application/json").timeout(Duration.ofSeconds(5)).GET().build();
    long deadline = System.nanoTime() + Duration.ofSeconds(timeoutSeconds).toNanos();
    while (System.nanoTime() < deadline) {
      try {
        HttpResponse<String> resp = http.send(req, HttpResponse.BodyHandlers.ofString());
        Matcher m = ACTIVE_NODES.matcher(resp.body());
        if (resp.statusCode() == 200 && m.find() && Integer.parseInt(m.group(1)) >= nodes) {
          return;
        }
      } catch (IOException e) {
        // Not listening yet: keep polling until the deadline.
      }
      Thread.sleep(250);
    }
    throw new IllegalStateException("RM REST not ready with " + nodes + " active nodes after "
        + timeoutSeconds + "s");
  }

  private static Kerberos startKdc(File work) throws Exception {
    File dir = new File(work, "kdc");
    if (!dir.mkdirs() && !dir.isDirectory()) {
      throw new IOException("cannot create " + dir);
    }
    Kerberos k = new Kerberos();
    k.kdc = new MiniKdc(MiniKdc.createConf(), dir);
    k.kdc.start();
    k.realm = k.kdc.getRealm();
    k.krb5Conf = k.kdc.getKrb5conf();
    k.sidecarKeytab = new File(dir, "sidecar.keytab");
    k.kdc.createPrincipal(k.sidecarKeytab, "sidecar");
    k.sidecarPrincipal = "sidecar@" + k.realm;
    // For MIT clients (python-gssapi): TCP to the KDC, no DNS games with "localhost".
    k.clientKrb5Conf = new File(dir, "krb5-client.conf");
    String client = "[libdefaults]\n"
        + "  default_realm = " + k.realm + "\n"
        + "  dns_lookup_kdc = false\n  dns_lookup_realm = false\n"
        + "  dns_canonicalize_hostname = false\n  rdns = false\n"
        + "  udp_preference_limit = 1\n  ticket_lifetime = 1h\n"
        + "[realms]\n  " + k.realm + " = {\n    kdc = " + k.kdc.getHost() + ":" + k.kdc.getPort()
        + "\n  }\n";
    Files.writeString(k.clientKrb5Conf.toPath(), client, StandardCharsets.UTF_8);
    return k;
  }

  /** With SPNEGO on the web endpoints an anonymous probe gets 401: count nodes in-process. */
  private static void waitReadyKerberized(ResourceManager rm, String rmUrl, int nodes,
      int timeoutSeconds) throws Exception {
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    HttpRequest req = HttpRequest.newBuilder(URI.create(rmUrl + "/ws/v1/cluster/info"))
        .timeout(Duration.ofSeconds(5)).GET().build();
    long deadline = System.nanoTime() + Duration.ofSeconds(timeoutSeconds).toNanos();
    while (System.nanoTime() < deadline) {
      try {
        int status = http.send(req, HttpResponse.BodyHandlers.discarding()).statusCode();
        if (status == 401 && rm.getResourceScheduler().getNumClusterNodes() >= nodes) {
          return;
        }
      } catch (IOException e) {
        // Not listening yet.
      }
      Thread.sleep(250);
    }
    throw new IllegalStateException("kerberized RM not ready with " + nodes + " nodes after "
        + timeoutSeconds + "s");
  }

  private static void writeDetails(File target, Options o, String rmUrl, String jhsUrl,
      Configuration effective, File amConfDir, Kerberos krb) throws IOException {
    // AM-only jars and JVM options come from the run script (all JVM flags live there).
    String amClasspath = amConfDir.getAbsolutePath() + File.pathSeparator
        + System.getProperty("java.class.path") + File.pathSeparator
        + System.getProperty("sidecar.it.am.extra.classpath", "");
    StringBuilder sb = new StringBuilder("{\n");
    appendField(sb, "rm_url", rmUrl);
    appendField(sb, "rm_webapp_address", effective.get(YarnConfiguration.RM_WEBAPP_ADDRESS));
    appendField(sb, "rm_address", effective.get(YarnConfiguration.RM_ADDRESS));
    appendField(sb, "rm_scheduler_address", effective.get(YarnConfiguration.RM_SCHEDULER_ADDRESS));
    appendField(sb, "jobhistory_url", jhsUrl);
    appendField(sb, "workdir", o.workDir.getAbsolutePath());
    appendField(sb, "effective_conf", new File(o.workDir, "effective-conf.xml").getAbsolutePath());
    appendField(sb, "java_home", System.getProperty("java.home"));
    appendField(sb, "hadoop_version", org.apache.hadoop.util.VersionInfo.getVersion());
    appendField(sb, "am_classpath", amClasspath);
    appendField(sb, "am_java_opts", System.getProperty("sidecar.it.am.java.opts", ""));
    if (krb != null) {
      appendField(sb, "kerberos_realm", krb.realm);
      appendField(sb, "krb5_conf", krb.clientKrb5Conf.getAbsolutePath());
      appendField(sb, "sidecar_principal", krb.sidecarPrincipal);
      appendField(sb, "sidecar_keytab", krb.sidecarKeytab.getAbsolutePath());
    }
    sb.append("  \"pid\": ").append(ProcessHandle.current().pid()).append(",\n");
    sb.append("  \"nodemanagers\": ").append(o.nodeManagers).append("\n}\n");
    Path tmp = new File(target.getPath() + ".tmp").toPath();
    Files.writeString(tmp, sb.toString(), StandardCharsets.UTF_8);
    Files.move(tmp, target.toPath(), java.nio.file.StandardCopyOption.REPLACE_EXISTING,
        java.nio.file.StandardCopyOption.ATOMIC_MOVE);
  }

  static void appendField(StringBuilder sb, String key, String value) {
    sb.append("  \"").append(key).append("\": ");
    if (value == null) {
      sb.append("null");
    } else {
      sb.append('"').append(jsonEscape(value)).append('"');
    }
    sb.append(",\n");
  }

  private static String jsonEscape(String s) {
    StringBuilder out = new StringBuilder(s.length() + 8);
    for (char c : s.toCharArray()) {
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    return out.toString();
  }
}
