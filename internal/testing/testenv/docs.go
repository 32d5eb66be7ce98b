package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// A Doc is a Markdown file of the user documentation, read for the claims
// it makes: its fenced blocks, its code spans and its links.
type Doc struct {
	// Path is the file's path relative to the repository root.
	Path   string
	Blocks []DocBlock
	// Spans are the inline code spans, Links the link destinations, each
	// with the line it is on.
	Spans, Links []DocText
}

// DocText is a piece of a Doc and the line it starts on.
type DocText struct {
	Line int
	Text string
}

// A DocBlock is a fenced block: ```lang marker, where marker is
// "illustrative" (run by no test), "file=<path>" (the block is that file of
// the repository) or "id=<name>" (a test runs it, finding it by name).
type DocBlock struct {
	DocText
	Lang, Marker string
}

// File and ID return the block's marker's value, or "".
func (b DocBlock) File() string { return strings.TrimPrefix(b.Marker, "file=") }

// ID returns the name of an id= block, or "".
func (b DocBlock) ID() string {
	if id, ok := strings.CutPrefix(b.Marker, "id="); ok {
		return id
	}
	return ""
}

// ReadDoc parses the Markdown file at root/path.
func ReadDoc(root, path string) (Doc, error) {
	src, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return Doc{}, err
	}
	d := Doc{Path: path}
	line := func(offset int) int { return bytes.Count(src[:offset], []byte("\n")) + 1 }
	tree := goldmark.New().Parser().Parse(text.NewReader(src))
	err = ast.Walk(tree, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.FencedCodeBlock:
			var body strings.Builder
			lines := n.Lines()
			start := 0
			for i := range lines.Len() {
				seg := lines.At(i)
				if i == 0 {
					start = seg.Start
				}
				body.Write(seg.Value(src))
			}
			b := DocBlock{DocText: DocText{Text: body.String()}}
			if n.Info != nil {
				info := strings.Fields(string(n.Info.Segment.Value(src)))
				if len(info) > 0 {
					b.Lang = info[0]
				}
				if len(info) > 1 {
					b.Marker = info[1]
				}
				start = n.Info.Segment.Start
			}
			b.Line = line(start)
			d.Blocks = append(d.Blocks, b)
			return ast.WalkSkipChildren, nil
		case *ast.CodeSpan:
			var s strings.Builder
			off := -1
			for c := n.FirstChild(); c != nil; c = c.NextSibling() {
				if t, ok := c.(*ast.Text); ok {
					if off < 0 {
						off = t.Segment.Start
					}
					s.Write(t.Segment.Value(src))
				}
			}
			d.Spans = append(d.Spans, DocText{Line: line(max(off, 0)), Text: s.String()})
			return ast.WalkSkipChildren, nil
		case *ast.Link:
			d.Links = append(d.Links, DocText{Line: nearLine(n, src, line), Text: string(n.Destination)})
		}
		return ast.WalkContinue, nil
	})
	return d, err
}

// nearLine is the line of the first text within n.
func nearLine(n ast.Node, src []byte, line func(int) int) int {
	for c := n.FirstChild(); c != nil; c = c.FirstChild() {
		if t, ok := c.(*ast.Text); ok {
			return line(t.Segment.Start)
		}
	}
	if p := n.Parent(); p != nil && p.Lines().Len() > 0 {
		return line(p.Lines().At(0).Start)
	}
	return 0
}

// DocBlockByID returns the block marked id=name in root/path.
func DocBlockByID(root, path, name string) (DocBlock, error) {
	d, err := ReadDoc(root, path)
	if err != nil {
		return DocBlock{}, err
	}
	for _, b := range d.Blocks {
		if b.ID() == name {
			return b, nil
		}
	}
	return DocBlock{}, fmt.Errorf("%s has no block marked id=%s", path, name)
}

// Commands returns the simple commands of a shell block, each as its
// words with quotes removed (pipelines and lists give one per command); it
// expands nothing: a $VAR or $(...) word is kept as written.
func Commands(block string) ([][]string, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(block), "")
	if err != nil {
		return nil, err
	}
	var (
		out     [][]string
		printer = syntax.NewPrinter()
	)
	syntax.Walk(f, func(n syntax.Node) bool {
		call, ok := n.(*syntax.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		var words []string
		for _, w := range call.Args {
			lit, err := expand.Literal(nil, w)
			if err != nil || strings.Contains(lit, "$") {
				var b strings.Builder
				_ = printer.Print(&b, w)
				lit = b.String()
			}
			words = append(words, lit)
		}
		out = append(out, words)
		return true
	})
	return out, nil
}
