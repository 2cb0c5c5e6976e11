package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// Files the tests check, relative to this package.
const (
	dashboardFile = "grafana/logplayer.json"
	alertsFile    = "prometheus/alerts.yaml"
	scrapeFile    = "prometheus/prometheus.yml"
)

// TestExportedMetrics starts the roles once, then checks the dashboard, the
// alerting rules and the metrics themselves against what they export.
func TestExportedMetrics(t *testing.T) {
	cat, mfs := gather(t, startProcesses(t))
	t.Logf("%d families exported", len(cat))

	t.Run("dashboard", func(t *testing.T) {
		exprs := dashboardExprs(t)
		if len(exprs) == 0 {
			t.Fatal("the dashboard has no expressions")
		}
		for _, e := range exprs {
			var problems []string
			if e.variable {
				problems = checkVariableQuery(e.expr, cat)
			} else {
				problems = checkExpr(expandGrafana(e.expr), cat)
				problems = append(problems, checkTemplate(expandGrafana(e.expr), e.legend, legendRef, cat)...)
			}
			for _, p := range prefixed(e.where, problems) {
				t.Errorf("%s: %s\n\texpr: %s", dashboardFile, p, e.expr)
			}
		}
		if t.Failed() {
			t.Logf("exported families: %s", strings.Join(cat.names(), " "))
		}
	})

	t.Run("rules", func(t *testing.T) {
		for _, g := range loadRules(t).Groups {
			for _, r := range g.Rules {
				name := r.Alert + r.Record
				problems := checkExpr(r.Expr, cat)
				for _, text := range slices.Sorted(maps.Values(r.Annotations)) {
					problems = append(problems, checkTemplate(r.Expr, text, alertRef, cat)...)
				}
				for _, p := range problems {
					t.Errorf("%s: group %s, rule %s: %s\n\texpr: %s", alertsFile, g.Name, name, p, r.Expr)
				}
			}
		}
		if t.Failed() {
			t.Logf("exported families: %s", strings.Join(cat.names(), " "))
		}
	})

	t.Run("promlint", func(t *testing.T) {
		problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	})
}

// Series the dashboard and the rules must keep using: what issue #17 asks
// an operator to see and to be alerted on.
var (
	dashboardMust = []string{
		"logstore_append_duration_seconds_bucket",      // append latency
		"logstore_aggregation_batch_txns_sum",          // batch size
		"logstore_raft_commit_duration_seconds_bucket", // Raft commit
		"logstore_head_lsn",
		"logplayer_target_state",
		"logplayer_target_lag_entries",
		"logplayer_target_lag_seconds",
		"logplayer_target_returns_total",
		"logplayer_delivery_duration_seconds_bucket",
		"logplayer_target_last_ack_lsn", // the retention floor
		"logstore_first_lsn",
	}
	rulesMust = []string{
		"logplayer_target_blocked",
		"logplayer_target_lag_seconds",
		"logstore_is_leader",
		"logstore_retention_forced_deletes_total",
	}
)

// TestCoverage checks the dashboard and the rules still show and alert on
// what they must.
func TestCoverage(t *testing.T) {
	used := func(exprs []string) map[string]bool {
		out := map[string]bool{}
		for _, e := range exprs {
			parsed, err := promql.ParseExpr(expandGrafana(e))
			if err != nil {
				continue // TestExportedMetrics reports it
			}
			parser.Inspect(parsed, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					out[vs.Name] = true
				}
				return nil
			})
		}
		return out
	}
	var dash, rules []string
	for _, e := range dashboardExprs(t) {
		if !e.variable {
			dash = append(dash, e.expr)
		}
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			rules = append(rules, r.Expr)
		}
	}
	for file, c := range map[string]struct {
		exprs, must []string
	}{dashboardFile: {dash, dashboardMust}, alertsFile: {rules, rulesMust}} {
		u := used(c.exprs)
		for _, m := range c.must {
			if !u[m] {
				t.Errorf("%s: no expression uses %s", file, m)
			}
		}
	}
}

// TestCheckerRejects shows the checks can fail: each expression names a
// metric, a series or a label that the catalog does not have.
func TestCheckerRejects(t *testing.T) {
	cat := catalog{
		"logstore_head_lsn":                {typ: dto.MetricType_GAUGE, labels: map[string]bool{"node": true}},
		"logstore_append_duration_seconds": {typ: dto.MetricType_HISTOGRAM, labels: map[string]bool{"node": true, "code": true}},
	}
	for _, ok := range []string{
		`max by (node) (logstore_head_lsn)`,
		`histogram_quantile(0.99, sum by (le, code) (rate(logstore_append_duration_seconds_bucket[5m])))`,
		`rate(logstore_append_duration_seconds_count{code="OK"}[5m])`,
		`up{job="logstore"} == 0`,
		expandGrafana(`logstore_head_lsn{node=~"$node"}[$__rate_interval]`),
	} {
		if p := checkExpr(ok, cat); len(p) != 0 {
			t.Errorf("%s: %v, want no problem", ok, p)
		}
	}
	for _, bad := range []string{
		`logstore_head_lsn_total`,                                  // no such metric
		`rate(logstore_append_duration_seconds[5m])`,               // a histogram by its bare name
		`logstore_head_lsn_bucket`,                                 // a gauge has no buckets
		`logstore_head_lsn{target="a"}`,                            // no such label
		`sum by (target) (logstore_head_lsn)`,                      // grouping by a label nobody has
		`{__name__=~"logstore_.*"}`,                                // no metric name
		`rate(logstore_append_duration_seconds_count[5m]`,          // does not parse
		`sum(rate(logstore_append_duration_seconds_count[$x]))`,    // a variable where a duration goes
		`label_values(logstore_head_lsn, target)`,                  // (as a variable query below)
		`histogram_quantile(0.5, rate(logplayer_nope_bucket[5m]))`, // unknown histogram
	} {
		var p []string
		if strings.HasPrefix(bad, "label_values") {
			p = checkVariableQuery(bad, cat)
		} else {
			p = checkExpr(bad, cat)
		}
		if len(p) == 0 {
			t.Errorf("%s: no problem reported", bad)
		}
		t.Logf("%s: %v", bad, p)
	}
}

// TestTemplateRejects shows a legend or an alert text that names a label
// the expression's result does not carry is reported, and the ones that do
// are not.
func TestTemplateRejects(t *testing.T) {
	cat := catalog{
		"logstore_head_lsn":                {typ: dto.MetricType_GAUGE, labels: map[string]bool{"node": true}},
		"logstore_append_duration_seconds": {typ: dto.MetricType_HISTOGRAM, labels: map[string]bool{"node": true, "code": true}},
	}
	for _, c := range []struct {
		expr, text string
		ok         bool
	}{
		{`logstore_head_lsn`, `{{node}} {{instance}}`, true},
		{`max by (node) (logstore_head_lsn)`, `{{ node }}`, true},
		{`max(logstore_head_lsn)`, `{{node}}`, false},
		{`histogram_quantile(0.99, sum by (le, code) (rate(logstore_append_duration_seconds_bucket[5m])))`, `{{code}}`, true},
		{`histogram_quantile(0.99, sum by (le, code) (rate(logstore_append_duration_seconds_bucket[5m])))`, `{{le}}`, false},
		{`scalar(max(logstore_head_lsn)) - logstore_head_lsn > 10`, `$labels.node`, true},
		{`sum without (node) (logstore_head_lsn)`, `$labels.node`, false},
		{`absent(logstore_head_lsn{node="a"})`, `$labels.job`, false},
	} {
		ref := legendRef
		if c.text[0] == '$' {
			ref = alertRef
		}
		if p := checkTemplate(c.expr, c.text, ref, cat); (len(p) == 0) != c.ok {
			t.Errorf("%s with %s: problems %v, want ok=%v", c.expr, c.text, p, c.ok)
		}
	}
}

// TestPromlintRejects shows the lint subtest can fail: a counter without
// _total and a gauge in milliseconds are both reported.
func TestPromlintRejects(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		prometheus.NewCounter(prometheus.CounterOpts{Name: "logstore_appends", Help: "Appends."}),
		prometheus.NewGauge(prometheus.GaugeOpts{Name: "logstore_commit_milliseconds", Help: "Commit time."}),
	)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	reported := map[string]bool{}
	for _, p := range problems {
		reported[p.Metric] = true
	}
	if !reported["logstore_appends"] || !reported["logstore_commit_milliseconds"] {
		t.Errorf("promlint reported %v, want both metrics", problems)
	}
}

// dashExpr is one PromQL expression of the dashboard and where it is.
type dashExpr struct {
	where, expr string
	legend      string
	variable    bool // a templating variable's query
}

// dashboard is the part of Grafana's dashboard model the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr         string `json:"expr"`
		RefID        string `json:"refId"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// dashboardExprs reads the dashboard, checks its shape (unique panel ids,
// every graph on the datasource variable with at least one query, titles)
// and returns its expressions.
func dashboardExprs(t *testing.T) []dashExpr {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("%s: uid and title must be set", dashboardFile)
	}
	var out []dashExpr
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Errorf("%s: variable %s: query: %v", dashboardFile, v.Name, err)
			}
			q = obj.Query
		}
		out = append(out, dashExpr{where: "variable " + v.Name, expr: q, variable: true})
	}
	ids := map[int]string{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup {
				t.Errorf("%s: panels %q and %q share id %d", dashboardFile, prev, p.Title, p.ID)
			}
			ids[p.ID] = p.Title
			if p.Title == "" {
				t.Errorf("%s: panel %d has no title", dashboardFile, p.ID)
			}
			walk(p.Panels)
			if p.Type == "row" || p.Type == "text" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("%s: panel %q must use the ${datasource} variable", dashboardFile, p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", dashboardFile, p.Title)
			}
			for _, q := range p.Targets {
				out = append(out, dashExpr{where: fmt.Sprintf("panel %q query %s", p.Title, q.RefID), expr: q.Expr, legend: q.LegendFormat})
			}
		}
	}
	walk(d.Panels)
	return out
}

// ruleFile is Prometheus's rule file format (the fields this project uses;
// an unknown field fails the decode).
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// severities are the values the rules' severity label may take.
var severities = map[string]bool{"critical": true, "warning": true}

// loadRules decodes the rule file strictly and checks every rule's shape:
// alert xor record, a for duration that parses, a severity, a summary and
// a description.
func loadRules(t *testing.T) ruleFile {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	if len(rf.Groups) == 0 {
		t.Fatalf("%s: no rule groups", alertsFile)
	}
	names := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("%s: a group needs a name and rules", alertsFile)
		}
		for _, r := range g.Rules {
			if (r.Alert == "") == (r.Record == "") {
				t.Errorf("%s: group %s: a rule is an alert or a record, not both or neither", alertsFile, g.Name)
				continue
			}
			if r.Record != "" {
				continue
			}
			if names[r.Alert] {
				t.Errorf("%s: alert %s defined twice", alertsFile, r.Alert)
			}
			names[r.Alert] = true
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: alert %s: for: %v", alertsFile, r.Alert, err)
				}
			}
			if !severities[r.Labels["severity"]] {
				t.Errorf("%s: alert %s: severity %q, want one of critical, warning", alertsFile, r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: alert %s needs a summary and a description", alertsFile, r.Alert)
			}
		}
	}
	return rf
}

// TestScrapeConfig checks that the example scrape configuration loads the
// rule file and scrapes the three roles under the job names the dashboard
// and rules use.
func TestScrapeConfig(t *testing.T) {
	b, err := os.ReadFile(scrapeFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName string `yaml:"job_name"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", scrapeFile, err)
	}
	if len(cfg.RuleFiles) != 1 || !strings.HasSuffix(cfg.RuleFiles[0], "alerts.yaml") {
		t.Errorf("%s: rule_files %v, want the one alerts.yaml", scrapeFile, cfg.RuleFiles)
	}
	var jobs []string
	for _, s := range cfg.ScrapeConfigs {
		jobs = append(jobs, s.JobName)
	}
	if want := []string{"logstore", "logplayer", "shard"}; fmt.Sprint(jobs) != fmt.Sprint(want) {
		t.Errorf("%s: jobs %v, want %v", scrapeFile, jobs, want)
	}
}
