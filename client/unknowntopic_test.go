package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/logplayer/logplayer/apierr"
	"github.com/logplayer/logplayer/client"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// TestTopicReaderUnknownTopic: a TopicReader of a topic never written
// fails with ErrUnknownTopic naming it (a typo must not wait forever),
// also on a 3-node cluster whose followers answer for themselves; with
// WaitForTopic it waits and reads the topic's first message once written.
func TestTopicReaderUnknownTopic(t *testing.T) {
	c := logstoretest.Start(t, 3, nil)
	cl := newClient(t, c.Addrs()...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := cl.NewTopicReader(client.TopicReaderConfig{Topic: "no-such-topic"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Next(ctx)
	if !errors.Is(err, client.ErrUnknownTopic) || apierr.Detail(err).GetTopic() != "no-such-topic" {
		t.Fatalf("Next: %v, want ErrUnknownTopic naming no-such-topic", err)
	}

	w, err := cl.NewTopicReader(client.TopicReaderConfig{Topic: "later", WaitForTopic: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	got := make(chan error, 1)
	go func() {
		m, err := w.Next(ctx)
		if err == nil && string(m.Message.Value) != "v" {
			err = errors.New("wrong message " + string(m.Message.Value))
		}
		got <- err
	}()
	p, err := cl.NewProducer(client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AppendAtomic(ctx, map[string][][]byte{"later": {[]byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiting reader: %v", err)
	}
}
