// A franz-go (kgo) client for the tests: produces one small record every 100 ms to a topic
// for a given time, so that its KIP-714 metrics loop (which starts with its first produce
// connection) runs and pushes on the subscription's interval.
//
//	kgo-client -bootstrap HOST:PORT -topic T -client-id ID -seconds N
//
// It prints one JSON line at the end: {"produced": N, "errors": N}. franz-go's own log lines
// (INFO) go to stderr, among them the subscription it received.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	bootstrap := flag.String("bootstrap", "127.0.0.1:9092", "bootstrap servers")
	topic := flag.String("topic", "kgo-test", "topic to produce to")
	clientID := flag.String("client-id", "kgo-client", "client.id")
	seconds := flag.Float64("seconds", 10, "how long to run")
	flag.Parse()

	client, err := kgo.NewClient(
		kgo.SeedBrokers(*bootstrap),
		kgo.ClientID(*clientID),
		kgo.DefaultProduceTopic(*topic),
		kgo.AllowAutoTopicCreation(),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)),
	)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kgo-client:", err)
		os.Exit(2)
	}
	defer client.Close()

	deadline := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	produced, failed := 0, 0
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		results := client.ProduceSync(ctx, &kgo.Record{Value: []byte("v")})
		cancel()
		if results.FirstErr() != nil {
			failed++
			fmt.Fprintln(os.Stderr, "kgo-client: produce:", results.FirstErr())
		} else {
			produced++
		}
		time.Sleep(100 * time.Millisecond)
	}
	out, _ := json.Marshal(map[string]int{"produced": produced, "errors": failed})
	fmt.Println(string(out))
}
