package inbox

import (
	"fmt"
	"html/template"
)

// pageFiles are the templates of each page, after the layout.
var pageFiles = map[string][]string{
	"signin":  {"signin.html"},
	"error":   {"error.html"},
	"inbox":   {"list.html", "inbox.html"},
	"history": {"list.html", "history.html"},
	"hold":    {"hold.html"},
}

// parsePages parses each page with the layout, from the embedded files.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for name, files := range pageFiles {
		paths := []string{"templates/layout.html"}
		for _, f := range files {
			paths = append(paths, "templates/"+f)
		}
		t, err := template.New(name).ParseFS(templateFS, paths...)
		if err != nil {
			return nil, fmt.Errorf("parse page %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}
