/*
 * The --ha mode of the launcher: two ResourceManagers in ResourceManager HA, as production runs
 * them, on one in-process ZooKeeper (Curator's TestingServer):
 *  - the embedded ZooKeeper-based elector picks the active RM and fails over on its own;
 *  - ZKRMStateStore with recovery on, so applications survive a failover;
 *  - the ZooKeeper scheduler-configuration store, so capacities pushed through the mutation
 *    API are what the new active RM loads.
 * RM web ports are PORT (rm0) and PORT+1 (rm1). A failover is asked for by creating the file
 * <workdir>/failover: the active RM is stopped (as if its host died), the other one takes over,
 * and a line "FAILOVER from=rmX to=rmY" is printed. Not part of the sidecar.
 */
package sidecar.it;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.apache.curator.test.TestingServer;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ha.HAServiceProtocol.HAServiceState;
import org.apache.hadoop.yarn.conf.HAUtil;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;
import org.apache.hadoop.yarn.server.resourcemanager.ResourceManager;

final class HaCluster {

  private static final String[] IDS = {"rm0", "rm1"};

  private HaCluster() {
  }

  static void run(String host, int port, int nodeManagers, File work, Map<String, String> props,
      int readyTimeoutSeconds) throws Exception {
    TestingServer zk = new TestingServer(true);
    YarnConfiguration conf = new YarnConfiguration();
    conf.set("hadoop.tmp.dir", new File(work, "tmp").getAbsolutePath());
    conf.setBoolean(YarnConfiguration.YARN_MINICLUSTER_FIXED_PORTS, true);
    conf.setBoolean(YarnConfiguration.RM_HA_ENABLED, true);
    conf.set(YarnConfiguration.RM_HA_IDS, String.join(",", IDS));
    conf.set(YarnConfiguration.RM_CLUSTER_ID, "sidecar-it-ha");
    conf.set(YarnConfiguration.RM_ZK_ADDRESS, zk.getConnectString());
    conf.setBoolean(YarnConfiguration.AUTO_FAILOVER_ENABLED, true);
    conf.setBoolean(YarnConfiguration.AUTO_FAILOVER_EMBEDDED, true);
    conf.setBoolean(YarnConfiguration.RECOVERY_ENABLED, true);
    conf.set(YarnConfiguration.RM_STORE,
        "org.apache.hadoop.yarn.server.resourcemanager.recovery.ZKRMStateStore");
    conf.set(YarnConfiguration.SCHEDULER_CONFIGURATION_STORE_CLASS,
        YarnConfiguration.ZK_CONFIGURATION_STORE);
    // Clients (NMs, AMs, the harness) retry the other RM quickly.
    conf.setLong(YarnConfiguration.CLIENT_FAILOVER_SLEEPTIME_BASE_MS, 100);
    conf.setLong(YarnConfiguration.CLIENT_FAILOVER_SLEEPTIME_MAX_MS, 1000);
    int rpcBase = port + 100;
    for (int i = 0; i < IDS.length; i++) {
      String id = IDS[i];
      conf.set(HAUtil.addSuffix(YarnConfiguration.RM_WEBAPP_ADDRESS, id), host + ":" + (port + i));
      conf.set(HAUtil.addSuffix(YarnConfiguration.RM_ADDRESS, id), host + ":" + (rpcBase + 10 * i));
      conf.set(HAUtil.addSuffix(YarnConfiguration.RM_SCHEDULER_ADDRESS, id),
          host + ":" + (rpcBase + 10 * i + 1));
      conf.set(HAUtil.addSuffix(YarnConfiguration.RM_RESOURCE_TRACKER_ADDRESS, id),
          host + ":" + (rpcBase + 10 * i + 2));
      conf.set(HAUtil.addSuffix(YarnConfiguration.RM_ADMIN_ADDRESS, id),
          host + ":" + (rpcBase + 10 * i + 3));
    }
    for (Map.Entry<String, String> e : props.entrySet()) {
      conf.set(e.getKey(), e.getValue());
    }
    MiniYARNCluster cluster = new MiniYARNCluster("sidecar-it-ha", IDS.length, nodeManagers, 1, 1);
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      System.out.println("STOPPING");
      System.out.flush();
      cluster.stop();
      try {
        zk.close();
      } catch (IOException e) {
        // stopping anyway
      }
      stopped.countDown();
    }, "sidecar-it-ha-shutdown"));
    cluster.init(conf);
    cluster.start();
    int active = waitActive(cluster, readyTimeoutSeconds);
    String activeUrl = "http://" + host + ":" + (port + active);
    MiniYarnLauncher.waitReady(activeUrl, nodeManagers, readyTimeoutSeconds);
    Configuration effective = cluster.getResourceManager(active).getConfig();
    File amConfDir = new File(work, "am-conf");
    if (!amConfDir.mkdirs() && !amConfDir.isDirectory()) {
      throw new IOException("cannot create " + amConfDir);
    }
    MiniYarnLauncher.writeConf(effective, new File(work, "effective-conf.xml"));
    MiniYarnLauncher.writeConf(effective, new File(amConfDir, "yarn-site.xml"));
    writeDetails(new File(work, "cluster.json"), host, port, work, amConfDir, nodeManagers);
    System.out.println("READY rm_url=http://" + host + ":" + port + " rm_url2=http://" + host
        + ":" + (port + 1) + " active=" + IDS[active] + " zk=" + zk.getConnectString());
    System.out.flush();
    watchFailover(cluster, new File(work, "failover"), stopped);
  }

  private static int waitActive(MiniYARNCluster cluster, int timeoutSeconds)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeoutSeconds * 1_000_000_000L;
    while (System.nanoTime() < deadline) {
      int active = activeIndex(cluster);
      if (active >= 0) {
        return active;
      }
      Thread.sleep(200);
    }
    throw new IllegalStateException("no active RM after " + timeoutSeconds + "s");
  }

  private static int activeIndex(MiniYARNCluster cluster) {
    for (int i = 0; i < IDS.length; i++) {
      ResourceManager rm = cluster.getResourceManager(i);
      if (rm != null && rm.getRMContext().getHAServiceState() == HAServiceState.ACTIVE) {
        return i;
      }
    }
    return -1;
  }

  /** Polls for the failover request file until the JVM is asked to stop. */
  private static void watchFailover(MiniYARNCluster cluster, File request, CountDownLatch stopped)
      throws InterruptedException {
    while (stopped.getCount() > 0) {
      if (request.exists()) {
        int from = activeIndex(cluster);
        if (from >= 0) {
          cluster.stopResourceManager(from);
          int to = waitActive(cluster, 120);
          System.out.println("FAILOVER from=" + IDS[from] + " to=" + IDS[to]);
          System.out.flush();
        }
        if (!request.delete()) {
          System.err.println("cannot delete " + request);
        }
      }
      Thread.sleep(200);
    }
  }

  private static void writeDetails(File target, String host, int port, File work, File amConfDir,
      int nodeManagers) throws IOException {
    String amClasspath = amConfDir.getAbsolutePath() + File.pathSeparator
        + System.getProperty("java.class.path") + File.pathSeparator
        + System.getProperty("sidecar.it.am.extra.classpath", "");
    StringBuilder sb = new StringBuilder("{\n");
    MiniYarnLauncher.appendField(sb, "rm_url", "http://" + host + ":" + port);
    MiniYarnLauncher.appendField(sb, "rm_url2", "http://" + host + ":" + (port + 1));
    MiniYarnLauncher.appendField(sb, "workdir", work.getAbsolutePath());
    MiniYarnLauncher.appendField(sb, "java_home", System.getProperty("java.home"));
    MiniYarnLauncher.appendField(sb, "hadoop_version",
        org.apache.hadoop.util.VersionInfo.getVersion());
    MiniYarnLauncher.appendField(sb, "am_classpath", amClasspath);
    MiniYarnLauncher.appendField(sb, "am_java_opts",
        System.getProperty("sidecar.it.am.java.opts", ""));
    sb.append("  \"pid\": ").append(ProcessHandle.current().pid()).append(",\n");
    sb.append("  \"nodemanagers\": ").append(nodeManagers).append("\n}\n");
    Files.writeString(target.toPath(), sb.toString(), StandardCharsets.UTF_8);
  }
}
