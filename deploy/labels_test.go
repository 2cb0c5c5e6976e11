package deploy_test

import (
	"fmt"
	"maps"
	"regexp"

	"github.com/prometheus/prometheus/promql/parser"
)

// outputLabels returns the label names every series of e's result carries
// (under-approximated where PromQL cannot say, such as absent's), for
// checking what a legend or an alert template may name.
func outputLabels(e parser.Expr, cat catalog) map[string]bool {
	switch n := e.(type) {
	case *parser.ParenExpr:
		return outputLabels(n.Expr, cat)
	case *parser.StepInvariantExpr:
		return outputLabels(n.Expr, cat)
	case *parser.UnaryExpr:
		return outputLabels(n.Expr, cat)
	case *parser.SubqueryExpr:
		return outputLabels(n.Expr, cat)
	case *parser.MatrixSelector:
		return outputLabels(n.VectorSelector, cat)
	case *parser.VectorSelector:
		l, _ := selectorLabels(n, cat)
		return l
	case *parser.AggregateExpr:
		in := outputLabels(n.Expr, cat)
		switch {
		case n.Op == parser.TOPK || n.Op == parser.BOTTOMK || n.Op == parser.LIMITK || n.Op == parser.LIMIT_RATIO:
			return in
		case n.Without:
			out := maps.Clone(in)
			for _, g := range n.Grouping {
				delete(out, g)
			}
			return out
		}
		out := map[string]bool{}
		for _, g := range n.Grouping {
			if in[g] {
				out[g] = true
			}
		}
		return out
	case *parser.BinaryExpr:
		return binaryLabels(n, cat)
	case *parser.Call:
		return callLabels(n, cat)
	}
	return map[string]bool{} // literals
}

func binaryLabels(n *parser.BinaryExpr, cat catalog) map[string]bool {
	l, r := outputLabels(n.LHS, cat), outputLabels(n.RHS, cat)
	switch {
	case n.LHS.Type() != parser.ValueTypeVector:
		return r
	case n.RHS.Type() != parser.ValueTypeVector:
		return l
	case n.Op == parser.LAND || n.Op == parser.LUNLESS:
		return l
	case n.Op == parser.LOR:
		out := map[string]bool{}
		for k := range l {
			if r[k] {
				out[k] = true
			}
		}
		return out
	}
	vm := n.VectorMatching
	side := l
	if vm.Card == parser.CardOneToMany {
		side = r
	}
	out := maps.Clone(side)
	if vm.Card == parser.CardOneToOne && (!n.Op.IsComparisonOperator() || n.ReturnBool) {
		// the result keeps the matching labels only
		if vm.On {
			out = map[string]bool{}
			for _, m := range vm.MatchingLabels {
				if side[m] {
					out[m] = true
				}
			}
		} else {
			for _, m := range vm.MatchingLabels {
				delete(out, m)
			}
		}
	}
	for _, inc := range vm.Include {
		out[inc] = true
	}
	return out
}

func callLabels(n *parser.Call, cat catalog) map[string]bool {
	switch n.Func.Name {
	case "absent", "absent_over_time", "vector", "scalar", "time", "pi":
		return map[string]bool{}
	case "label_replace", "label_join":
		out := maps.Clone(outputLabels(n.Args[0], cat))
		if dst, ok := n.Args[1].(*parser.StringLiteral); ok {
			out[dst.Val] = true
		}
		return out
	case "histogram_quantile":
		out := maps.Clone(outputLabels(n.Args[1], cat))
		delete(out, "le")
		return out
	}
	for _, a := range n.Args {
		if a.Type() == parser.ValueTypeVector || a.Type() == parser.ValueTypeMatrix {
			return outputLabels(a, cat)
		}
	}
	return map[string]bool{}
}

// Template references: Grafana's legend {{label}}, and an alert
// annotation's $labels.label.
var (
	legendRef = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)
	alertRef  = regexp.MustCompile(`\$labels\.([A-Za-z_][A-Za-z0-9_]*)`)
)

// checkTemplate reports every label text names (through ref) that the
// result of expr (already expanded, and known to parse) does not carry.
func checkTemplate(expr, text string, ref *regexp.Regexp, cat catalog) []string {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil // reported by checkExpr
	}
	have := outputLabels(e, cat)
	var problems []string
	for _, m := range ref.FindAllStringSubmatch(text, -1) {
		if !have[m[1]] {
			problems = append(problems, fmt.Sprintf("%q names label %s, which the result does not carry", text, m[1]))
		}
	}
	return problems
}
