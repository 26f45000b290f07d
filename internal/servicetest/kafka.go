package servicetest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// KafkaVersion is the Kafka release the tests run, from its jars on Maven Central (4.3.1 is
// the newest whose dependencies all resolve there; 4.4.0 lacks kafka-tools-api).
const KafkaVersion = "4.3.1"

// Kafka is one single-node Kafka broker in KRaft mode (broker and controller in one JVM) on
// 127.0.0.1:Port. Unlike Server it does not need a test to start: a package starts one in
// its TestMain or on first use (SharedKafka) and the JVM's start-up is paid once.
type Kafka struct {
	Port  int
	cport int // the controller's listener
	dir   string
	libs  string
	proc  process

	// With security (StartKafkaSecure): SSLPort is a listener over TLS that requires a client
	// certificate, SASLPort one over TLS that requires SASL (PLAIN, SCRAM-SHA-256 or
	// SCRAM-SHA-512). Port stays plain, for the probe and for admin clients.
	SSLPort, SASLPort int
	sec               *KafkaSecurity
}

// KafkaSecurity is what a secured broker is given (StartKafkaSecure).
type KafkaSecurity struct {
	KeyStore   string            // a PEM file: the broker's PKCS #8 key, then its certificate
	TrustStore string            // a PEM file: the CA certificates that clients' certificates chain to
	Users      map[string]string // SASL users and their passwords, for every mechanism
}

// SSLAddr and SASLAddr are the secured listeners' host:port.
func (k *Kafka) SSLAddr() string  { return "127.0.0.1:" + strconv.Itoa(k.SSLPort) }
func (k *Kafka) SASLAddr() string { return "127.0.0.1:" + strconv.Itoa(k.SASLPort) }

// StartKafkaSecure is StartKafka with two more listeners, secured as sec says.
func StartKafkaSecure(sec KafkaSecurity) (*Kafka, error) { return startKafka(&sec) }

// Addr is the broker's host:port.
func (k *Kafka) Addr() string { return "127.0.0.1:" + strconv.Itoa(k.Port) }

// ErrNoJava is returned by StartKafka when java is not installed.
var ErrNoJava = errors.New("java is not installed: apt-get install -y openjdk-17-jre-headless maven (scripts/test.sh installs them)")

// StartKafka formats a fresh broker in a new temporary directory and starts it, fetching
// Kafka's jars with Maven first if they are not cached (under the user cache directory,
// herald-kafka/<version>).
func StartKafka() (*Kafka, error) { return startKafka(nil) }

func startKafka(sec *KafkaSecurity) (*Kafka, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, ErrNoJava
	}
	libs, err := kafkaJars()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "herald-kafka-")
	if err != nil {
		return nil, err
	}
	k := &Kafka{dir: dir, libs: libs, sec: sec, proc: process{name: "kafka", dir: dir, tail: 3000, every: 50 * time.Millisecond}}
	var errs []string
	for attempt := 0; attempt < 5; attempt++ {
		if k.Port, err = anyPort(); err != nil {
			break
		}
		if k.cport, err = anyPort(); err != nil {
			break
		}
		if sec != nil {
			if k.SSLPort, err = anyPort(); err != nil {
				break
			}
			if k.SASLPort, err = anyPort(); err != nil {
				break
			}
		}
		if err = k.format(java); err != nil {
			break
		}
		if err = k.run(); err == nil {
			return k, nil
		}
		errs = append(errs, err.Error())
		_ = os.RemoveAll(filepath.Join(dir, "data"))
	}
	if err != nil {
		errs = append(errs, err.Error())
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("kafka did not start: %s", strings.Join(errs, "; "))
}

// format writes server.properties for the current ports and formats the log directory.
func (k *Kafka) format(java string) error {
	listeners := "PLAINTEXT://127.0.0.1:" + strconv.Itoa(k.Port)
	protocols := "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
	var secure []string
	var scram []string // StorageTool's arguments adding the SCRAM users
	if sec := k.sec; sec != nil {
		listeners += ",SSL://127.0.0.1:" + strconv.Itoa(k.SSLPort) + ",SASL_SSL://127.0.0.1:" + strconv.Itoa(k.SASLPort)
		protocols += ",SSL:SSL,SASL_SSL:SASL_SSL"
		var plain strings.Builder
		plain.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
		for user, pw := range sec.Users {
			fmt.Fprintf(&plain, " user_%s=%q", user, pw)
			for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
				scram = append(scram, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, user, pw))
			}
		}
		plain.WriteString(";")
		secure = []string{
			"ssl.keystore.type=PEM",
			"ssl.keystore.location=" + sec.KeyStore,
			"ssl.truststore.type=PEM",
			"ssl.truststore.location=" + sec.TrustStore,
			"listener.name.ssl.ssl.client.auth=required",
			"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
			"listener.name.sasl_ssl.plain.sasl.jaas.config=" + plain.String(),
			"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
			"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;",
		}
	}
	props := strings.Join(append([]string{
		"process.roles=broker,controller",
		"node.id=1",
		"controller.quorum.voters=1@127.0.0.1:" + strconv.Itoa(k.cport),
		"listeners=" + listeners + ",CONTROLLER://127.0.0.1:" + strconv.Itoa(k.cport),
		"advertised.listeners=" + listeners,
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=" + protocols,
		"log.dirs=" + filepath.Join(k.dir, "data"),
		"offsets.topic.replication.factor=1",
		"offsets.topic.num.partitions=4",
		"transaction.state.log.replication.factor=1",
		"transaction.state.log.min.isr=1",
		"share.coordinator.state.topic.replication.factor=1",
		"share.coordinator.state.topic.min.isr=1",
		"min.insync.replicas=1",
		"default.replication.factor=1",
		"num.partitions=1",
		"auto.create.topics.enable=true",
		"group.initial.rebalance.delay.ms=0",
		"log.cleaner.dedupe.buffer.size=16777216",
		// A broker killed and started again re-registers only once its former session has
		// expired (9 s by default): 2 s keeps restart tests short.
		"broker.session.timeout.ms=2000",
		"broker.heartbeat.interval.ms=500",
	}, secure...), "\n") + "\n"
	if err := os.WriteFile(k.props(), []byte(props), 0o644); err != nil {
		return err
	}
	id := make([]byte, 16)
	for {
		_, _ = rand.Read(id)
		if s := base64.RawURLEncoding.EncodeToString(id); s[0] != '-' {
			out, err := exec.Command(java, append([]string{"-cp", filepath.Join(k.libs, "*"), "kafka.tools.StorageTool",
				"format", "-t", s, "-c", k.props()}, scram...)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("formatting kafka storage: %v: %s", err, out)
			}
			return nil
		}
	}
}

func (k *Kafka) props() string { return filepath.Join(k.dir, "server.properties") }

// run starts the JVM and waits until the broker answers an ApiVersions request.
func (k *Kafka) run() error {
	return k.proc.run(k.Port, 2*Ready, func() error { return apiVersions(k.Addr()) },
		"java", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", filepath.Join(k.libs, "*"), "kafka.Kafka", k.props())
}

// apiVersions sends ApiVersions v0 and checks that the broker answers without an error.
func apiVersions(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	// size, api key 18, version 0, correlation id 1, client id null
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	if _, err := c.Write(req); err != nil {
		return err
	}
	var head [10]byte // size, correlation id, error code
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	if code := int16(binary.BigEndian.Uint16(head[8:])); code != 0 {
		return fmt.Errorf("ApiVersions answered error code %d", code)
	}
	return nil
}

// Kill stops the broker with SIGKILL, as a crash would, and waits for the process to exit.
func (k *Kafka) Kill() { k.proc.kill() }

// Stop stops the broker with SIGTERM (a clean shutdown), killing it after 20 s.
func (k *Kafka) Stop() {
	p := &k.proc
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		p.cmd = nil
	case <-time.After(20 * time.Second):
		p.kill()
	}
}

// Start starts a stopped broker again on the same ports with its data.
func (k *Kafka) Start() error {
	if k.proc.cmd != nil {
		return errors.New("kafka: Start while running")
	}
	deadline := time.Now().Add(Ready)
	for {
		err := k.run()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond) // the old process's port may linger a moment
	}
}

// Close stops the broker and removes its files.
func (k *Kafka) Close() {
	k.Kill()
	_ = os.RemoveAll(k.dir)
}

var shared struct {
	once sync.Once
	k    *Kafka
	err  error
}

// SharedKafka returns the test binary's broker, started on first use; the package's TestMain
// calls CloseSharedKafka after m.Run. Without java the test is skipped; any other failure
// fails it.
func SharedKafka(t testing.TB) *Kafka {
	t.Helper()
	shared.once.Do(func() { shared.k, shared.err = StartKafka() })
	if errors.Is(shared.err, ErrNoJava) {
		t.Skipf("skipping the Kafka test: %v", shared.err)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.k
}

// CloseSharedKafka stops the broker SharedKafka started, if any.
func CloseSharedKafka() {
	if shared.k != nil {
		shared.k.Close()
	}
}

// KafkaJars returns the directory of Kafka's jars, fetching them with Maven when absent, for
// a harness that runs its own broker (the chaos harness runs one in a network namespace).
func KafkaJars() (string, error) { return kafkaJars() }

// kafkaJars returns the directory of Kafka's jars, fetching them with Maven when absent.
func kafkaJars() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	root := filepath.Join(cache, "herald-kafka", KafkaVersion)
	libs := filepath.Join(root, "libs")
	if ents, err := os.ReadDir(libs); err == nil && len(ents) > 0 {
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", errors.New("kafka's jars are not cached and mvn is not installed: apt-get install -y maven (scripts/test.sh installs it)")
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, "fetch-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	pom := `<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>herald</groupId><artifactId>kafka-jars</artifactId><version>1</version><dependencies>
<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>` + KafkaVersion + `</version></dependency>
<dependency><groupId>org.slf4j</groupId><artifactId>slf4j-simple</artifactId><version>1.7.36</version></dependency>
</dependencies></project>`
	if err := os.WriteFile(filepath.Join(tmp, "pom.xml"), []byte(pom), 0o644); err != nil {
		return "", err
	}
	cmd := exec.Command(mvn, "-B", "-q", "-DoutputDirectory="+filepath.Join(tmp, "libs"),
		"org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fetching kafka's jars with maven: %v: %s", err, out)
	}
	// Another test binary may have fetched them meanwhile: either copy will do.
	if err := os.Rename(filepath.Join(tmp, "libs"), libs); err != nil {
		if ents, rerr := os.ReadDir(libs); rerr != nil || len(ents) == 0 {
			return "", err
		}
	}
	return libs, nil
}
