package herald

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The documentation must stand on its own in a clone: every relative link in the Markdown
// pages resolves to a file of the repository (and, with a #fragment, to one of its headings),
// and no file names a document that is not in the repository.

// docPages are the Markdown pages whose links TestDocLinks checks.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"README.md", "CONTRIBUTING.md", "LOCKS.md", "bench/floor/README.md", "test/js/README.md"}
	more, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(more) == 0 {
		t.Fatal("no docs/*.md pages found: run the test from the repository root")
	}
	return append(pages, more...)
}

// mdLink matches an inline Markdown link or image: [text](target) or [text](target "title").
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

func TestDocLinks(t *testing.T) {
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Errorf("%s: %v", page, err)
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(stripCode(string(text)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				t.Errorf("%s: link %q leaves the repository; link to a page in it instead", page, target)
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if rel, err := filepath.Rel(".", path); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s: link %q points outside the repository", page, target)
					continue
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %q: %v", page, target, err)
					continue
				}
			}
			if frag != "" && strings.HasSuffix(path, ".md") {
				body, err := os.ReadFile(path)
				if err != nil {
					t.Errorf("%s: link %q: %v", page, target, err)
					continue
				}
				if !headingAnchors(string(body))[frag] {
					t.Errorf("%s: link %q: %s has no heading with anchor #%s", page, target, path, frag)
				}
			}
		}
	}
}

// stripCode removes fenced code blocks and inline code spans, where ](...) is not a link.
func stripCode(s string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(s) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || strings.HasPrefix(line, "    ") {
			continue
		}
		parts := strings.Split(line, "`")
		for i := 0; i < len(parts); i += 2 { // even parts are outside code spans
			b.WriteString(parts[i])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown page: lowercased,
// punctuation dropped, spaces turned into hyphens.
func headingAnchors(s string) map[string]bool {
	anchors := map[string]bool{}
	fenced := false
	for line := range strings.Lines(s) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var a strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				a.WriteRune(r)
			}
		}
		anchors[a.String()] = true
	}
	return anchors
}

// staleRefs are names of documents that live outside the repository (or never existed in it);
// code, scripts and docs must point to the pages under docs/ instead.
var staleRefs = []string{
	"../" + "shared",
	"PROTOCOL" + ".md",
	"DESIGN" + ".md",
	"STYLE" + ".md",
	"tools/" + "floor",
	"kafka-" + "notes",
}

// issueRef matches a reference to an issue: by its number (the word, then a number or #number),
// or as the definite article and the word. Issues live outside the repository, so comments and docs say what the
// behaviour or the attack is instead.
var issueRef = regexp.MustCompile(`(?i)\bissues?[ -]+#?[0-9]+|\bthe issue\b|\bissue's`)

// TestDocNoReferencesOutside checks that no source, script or document names a file that is
// not in the repository, or an issue by its number.
func TestDocNoReferencesOutside(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".mjs", ".js", ".json", ".yml", ".yaml", ".toml":
		default:
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, ref := range staleRefs {
			if i := strings.Index(string(text), ref); i >= 0 {
				line := 1 + strings.Count(string(text[:i]), "\n")
				t.Errorf("%s:%d names %q, which is not in the repository: point to docs/ instead", path, line, ref)
			}
		}
		if loc := issueRef.FindIndex(text); loc != nil {
			line := 1 + strings.Count(string(text[:loc[0]]), "\n")
			t.Errorf("%s:%d refers to %q: describe the behaviour instead", path, line, text[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// conflictMarker matches the first and last lines git leaves where a merge conflicted (not
// the middle one, =======, which a Markdown heading may underline with).
var conflictMarker = regexp.MustCompile(`(?m)^(<<<<<<< |>>>>>>> )`)

// TestDocNoConflictMarkers checks that no page or source kept the markers of a merge that
// conflicted: a page that shows both sides of a merge says two things at once.
func TestDocNoConflictMarkers(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".sh", ".mjs", ".js", ".ts", ".json", ".yml", ".yaml", ".toml", ".html", ".cfg", ".service":
		default:
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if loc := conflictMarker.FindIndex(text); loc != nil {
			t.Errorf("%s:%d: a merge conflict's marker %q", path, 1+strings.Count(string(text[:loc[0]]), "\n"), text[loc[0]:loc[1]])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
