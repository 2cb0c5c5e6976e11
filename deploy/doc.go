// Package deploy holds what an operator deploys beside the binary: the
// container image (Dockerfile), a compose file for a 3-store cluster, the
// Grafana dashboard (grafana/logplayer.json), the Prometheus alerting rules
// (prometheus/alerts.yaml) and a scrape configuration for the compose
// cluster (prometheus/prometheus.yml).
//
// The package has no code of its own. Its tests keep the files honest: every
// PromQL expression in the dashboard and the rules must parse and name only
// metrics (and labels) that a LogStore node, a LogPlayer and a shard really
// export, gathered from real components started in the test process; a
// panel's legend and an alert's annotations may name only labels the
// expression's result carries; every exported metric passes client_golang's
// promlint.
package deploy
