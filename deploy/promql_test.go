package deploy_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/promql/parser"
)

// promql parses with the default functions and no experimental syntax: what
// a stock Prometheus server accepts.
var promql = parser.NewParser(parser.Options{})

// synthetic are series Prometheus itself makes: the scrape's up and the
// alert state series. No process exports them.
var synthetic = map[string]bool{"up": true, "ALERTS": true, "ALERTS_FOR_STATE": true}

// targetLabels are attached by the scrape to every series.
var targetLabels = map[string]bool{"job": true, "instance": true}

// grafanaVar matches a Grafana template variable: $name, ${name},
// ${name:format} or [[name]].
var grafanaVar = regexp.MustCompile(`\$\{[A-Za-z0-9_]+(:[a-z]+)?\}|\$[A-Za-z0-9_]+|\[\[[A-Za-z0-9_]+\]\]`)

// expandGrafana replaces Grafana's variables by what they stand for when
// the panel runs: the interval variables by a duration, every other one
// (used inside a label matcher's string) by a regexp.
func expandGrafana(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		name := strings.Trim(v, "${}[]")
		name, _, _ = strings.Cut(name, ":")
		switch name {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		case "__interval_ms", "__range_ms", "__range_s":
			return "300"
		}
		return ".*"
	})
}

// checkExpr parses expr and returns what is wrong with it against the
// exported catalog: a parse error, a selector without a metric name, a name
// no process exports (histograms may be selected by their _bucket, _sum and
// _count series), a label matched on that the family never carries, or a
// grouping label that none of the expression's families carries.
func checkExpr(expr string, cat catalog) []string {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	have := map[string]bool{} // label names the selected families carry
	for k := range targetLabels {
		have[k] = true
	}
	var groupings [][]string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			labels, problem := selectorLabels(n, cat)
			if problem != "" {
				problems = append(problems, problem)
				return nil
			}
			for l := range labels {
				have[l] = true
			}
			for _, m := range n.LabelMatchers {
				if m.Name != "__name__" && !labels[m.Name] {
					problems = append(problems, fmt.Sprintf("%s has no label %q", n.Name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			groupings = append(groupings, n.Grouping)
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				groupings = append(groupings, n.VectorMatching.MatchingLabels, n.VectorMatching.Include)
			}
		}
		return nil
	})
	for _, g := range groupings {
		for _, l := range g {
			if !have[l] {
				problems = append(problems, fmt.Sprintf("groups or matches by label %q that none of its metrics carries", l))
			}
		}
	}
	return problems
}

// selectorLabels resolves a selector's metric name in the catalog and
// returns the label names its series carry, or a problem.
func selectorLabels(n *parser.VectorSelector, cat catalog) (map[string]bool, string) {
	name := n.Name
	if name == "" {
		return nil, fmt.Sprintf("selector %s names no metric", n)
	}
	if synthetic[name] {
		all := map[string]bool{"alertname": true, "alertstate": true, "severity": true}
		for k := range targetLabels {
			all[k] = true
		}
		return all, ""
	}
	labels := map[string]bool{}
	for k := range targetLabels {
		labels[k] = true
	}
	if f, ok := cat[name]; ok {
		for k := range f.labels {
			labels[k] = true
		}
		if f.typ == dto.MetricType_HISTOGRAM || f.typ == dto.MetricType_SUMMARY {
			return nil, fmt.Sprintf("%s is a %v: select its _bucket, _sum or _count series", name, f.typ)
		}
		return labels, ""
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := cat[base]
		if !ok || !(f.typ == dto.MetricType_HISTOGRAM || (f.typ == dto.MetricType_SUMMARY && suffix != "_bucket")) {
			break
		}
		for k := range f.labels {
			labels[k] = true
		}
		if suffix == "_bucket" {
			labels["le"] = true
		}
		return labels, ""
	}
	return nil, fmt.Sprintf("%s is not a metric any process exports", name)
}

// labelValuesQuery matches Grafana's label_values(metric, label) and
// label_values(label) variable queries.
var labelValuesQuery = regexp.MustCompile(`^label_values\((?:(.+),)?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)

// checkVariableQuery checks a Grafana variable's query: label_values of an
// exported metric and one of its labels, or a PromQL expression.
func checkVariableQuery(q string, cat catalog) []string {
	m := labelValuesQuery.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return checkExpr(expandGrafana(q), cat)
	}
	sel, label := strings.TrimSpace(m[1]), m[2]
	if sel == "" {
		return []string{fmt.Sprintf("label_values(%s) must name the metric it reads", label)}
	}
	// label_values(sel, label) is sel grouped by label.
	return checkExpr(fmt.Sprintf("count by (%s) (%s)", label, expandGrafana(sel)), cat)
}

// prefixed returns problems with what prefixed to each.
func prefixed(what string, problems []string) []string {
	out := slices.Clone(problems)
	for i := range out {
		out[i] = what + ": " + out[i]
	}
	return out
}
