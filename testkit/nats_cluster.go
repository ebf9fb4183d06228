package testkit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// natsClusterNodes is the number of nodes in a NATSCluster: the fewest that keep a JetStream
// quorum (and an R3 stream) when one dies.
const natsClusterNodes = 3

// NATSCluster is a throwaway three-node NATS cluster with JetStream on free 127.0.0.1 ports,
// each node with its own store dir in a temp dir. It lives until the test ends; every node
// still running then is killed by PID.
//
// Kill may be called from any goroutine.
type NATSCluster struct {
	t     testing.TB
	nodes []*natsNode
}

type natsNode struct {
	name       string
	clientPort int
	httpPort   int // monitoring: /routez and /jsz tell when the cluster has formed
	proc       *process
}

// StartNATSCluster starts three nats-server nodes (-js, --cluster with routes to the others,
// one cluster name) and returns once every node is routed to the two others and agrees with
// them on a JetStream meta leader, so that a stream of three replicas can be created at once.
// It fails the test if nats-server is missing or the cluster does not form.
func StartNATSCluster(t testing.TB) *NATSCluster {
	t.Helper()
	bin := findBinary(t, "nats-server", "nats-server")
	ports := freePorts(t, 3*natsClusterNodes) // client, cluster and monitoring port per node
	routes := make([]string, natsClusterNodes)
	for i := range natsClusterNodes {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i+1])
	}
	c := &NATSCluster{t: t}
	for i := range natsClusterNodes {
		n := &natsNode{name: fmt.Sprintf("n%d", i+1), clientPort: ports[3*i], httpPort: ports[3*i+2]}
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		argv := []string{bin, "-a", "127.0.0.1", "-p", strconv.Itoa(n.clientPort),
			"-m", strconv.Itoa(n.httpPort), "-n", n.name,
			"-js", "-sd", t.TempDir(),
			"--cluster", routes[i], "--cluster_name", "vgtest", "--routes", strings.Join(others, ","),
		}
		n.proc = newProcess(t, "nats cluster node "+n.name+" "+c.addr(n), nil)
		// A node alone has no JetStream quorum: here it need only accept clients; the
		// cluster as a whole is waited for below.
		url := "nats://" + c.addr(n)
		if err := n.proc.start(argv, func(ctx context.Context) error { return natsAccepts(ctx, url) }); err != nil {
			t.Fatalf("testkit: %v", err)
		}
		c.nodes = append(c.nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	for _, n := range c.nodes {
		if err := waitNATSClustered(ctx, n); err != nil {
			t.Fatalf("testkit: nats cluster did not form: %v", err)
		}
	}
	return c
}

func (c *NATSCluster) addr(n *natsNode) string { return fmt.Sprintf("127.0.0.1:%d", n.clientPort) }

// URL returns node i's client URL (nats://127.0.0.1:port), i in [0, 3).
func (c *NATSCluster) URL(i int) string { return "nats://" + c.addr(c.nodes[i]) }

// Name returns node i's server name, as nats.Conn.ConnectedServerName reports it.
func (c *NATSCluster) Name(i int) string { return c.nodes[i].name }

// URLs returns the client URLs of the nodes given by index, in that order, comma-separated
// as nats.Connect (and VG_NATS_URL) takes a server list; with no index, every node's.
func (c *NATSCluster) URLs(nodes ...int) string {
	if len(nodes) == 0 {
		nodes = []int{0, 1, 2}
	}
	urls := make([]string, len(nodes))
	for k, i := range nodes {
		urls[k] = c.URL(i)
	}
	return strings.Join(urls, ",")
}

// Node returns the index of the node with the given client URL or server name, or -1.
func (c *NATSCluster) Node(urlOrName string) int {
	for i, n := range c.nodes {
		if urlOrName == n.name || urlOrName == c.URL(i) {
			return i
		}
	}
	return -1
}

// Kill sends SIGKILL to node i, as a crash would, and returns once it has exited. Killing a
// dead node does nothing.
func (c *NATSCluster) Kill(i int) {
	if err := c.nodes[i].proc.kill(); err != nil {
		c.t.Errorf("testkit: kill nats node %s: %v", c.nodes[i].name, err)
	}
}

// natsAccepts returns nil once a client can connect to the server at url.
func natsAccepts(ctx context.Context, url string) error {
	nc, err := natsConnect(ctx, url)
	if err != nil {
		return err
	}
	nc.Close()
	return nil
}

// waitNATSClustered returns once node n has a route to each other node and knows a leader of
// a JetStream meta group of all three (the leader itself: with both followers current), or
// ctx ends.
func waitNATSClustered(ctx context.Context, n *natsNode) error {
	base := fmt.Sprintf("http://127.0.0.1:%d", n.httpPort)
	var last string
	for {
		var routez struct {
			Routes []struct {
				RemoteID string `json:"remote_id"`
			} `json:"routes"`
		}
		var jsz struct {
			Meta *struct {
				Leader      string `json:"leader"`
				ClusterSize int    `json:"cluster_size"`
				Replicas    []struct {
					Current bool `json:"current"`
				} `json:"replicas"`
			} `json:"meta_cluster"`
		}
		err := getJSON(ctx, base+"/routez", &routez)
		if err == nil {
			err = getJSON(ctx, base+"/jsz", &jsz)
		}
		if err != nil {
			last = err.Error()
		} else {
			peers := map[string]bool{}
			for _, r := range routez.Routes {
				peers[r.RemoteID] = true
			}
			current := 0
			if jsz.Meta != nil {
				for _, r := range jsz.Meta.Replicas {
					if r.Current {
						current++
					}
				}
			}
			// Only the leader lists the replicas: it must see both followers current.
			if len(peers) == natsClusterNodes-1 && jsz.Meta != nil && jsz.Meta.Leader != "" &&
				jsz.Meta.ClusterSize == natsClusterNodes &&
				(jsz.Meta.Leader != n.name || current == natsClusterNodes-1) {
				return nil
			}
			last = fmt.Sprintf("routed to %d peers; meta group %+v", len(peers), jsz.Meta)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s", n.name, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func getJSON(ctx context.Context, url string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
