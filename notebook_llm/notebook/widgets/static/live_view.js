// notebook_llm live view: the anywidget front end of notebook_llm/notebook/widgets/live.py (read its
// docstring for the message protocol). Hand-written: it appends each delta once and renders the
// Markdown here, with marked (MIT) and DOMPurify (Apache-2.0 or MPL-2.0), both vendored next to
// this file and read once per browser page from the kernel's library model (the pane's "lib"
// trait names it).
//
// Safety: the answer is untrusted. marked's raw-HTML tokens are rendered escaped (as text), and
// the produced HTML goes through DOMPurify (allowed tags and attributes below, the URL rule and
// images-as-links in its hooks) before it reaches the page: no script, no event handler, no
// javascript: or data: URL, no image. Tool cards are HTML built and escaped by the kernel
// (render.tool_card_html); the argument text streamed after a card was shown is appended to it
// as text.

const PANES = new Map(); // model key -> {blocks: Map(id -> block), order: [], stats, views}
let LIB = null; // {marked, purify}, once loaded on this page
let LIB_WAIT = null; // a Promise while they are being fetched
const WAITERS = new Set(); // views to re-render when the libraries arrive

const PURIFY = {
  ALLOWED_TAGS: ("p h1 h2 h3 h4 h5 h6 ul ol li pre code blockquote em strong del s a br hr " +
    "table thead tbody tr th td input span div sup sub").split(" "),
  ALLOWED_ATTR: ["href", "title", "align", "start", "type", "checked", "disabled", "class"],
  // The same rule as the hook's, for DOMPurify's own check: http, https, mailto or relative.
  ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};
const SCHEMES = new Set(["http:", "https:", "mailto:"]);

// A link may point at url if the browser itself reads it as http, https or mailto; a relative
// URL resolves against the (placeholder) https base. The same rule as the kernel's
// (safe_html.safe_link), for the final output.
function safeUrl(url) {
  try {
    return SCHEMES.has(new URL(String(url), "https://relative.invalid/").protocol);
  } catch {
    return false;
  }
}

// An image becomes a link to it: the browser fetches a remote image as soon as it is shown,
// and a URL the answer chose can carry what the answer knows (a prompt-injected answer leaking
// the conversation). The kernel does the same in the final output (safe_html). DOMPurify
// parses into an inert document: nothing there is fetched.
function imageLink(img) {
  const src = img.getAttribute("src") || "";
  const a = img.ownerDocument.createElement("a");
  if (safeUrl(src)) a.setAttribute("href", src);
  a.textContent = "image: " + (img.getAttribute("alt") || src);
  return a;
}

function configure(purify) {
  purify.addHook("uponSanitizeElement", (node, data) => {
    // Replaced in place: DOMPurify's walk goes on with the link (its href is checked below);
    // the detached image is then dropped (img is not an allowed tag).
    if (data.tagName === "img" && node.parentNode) node.replaceWith(imageLink(node));
  });
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.nodeName === "A") {
      if (node.hasAttribute("href") && !safeUrl(node.getAttribute("href"))) {
        node.removeAttribute("href");
      }
      node.setAttribute("target", "_blank");
      node.setAttribute("rel", "noopener noreferrer");
    } else if (node.nodeName === "INPUT") {
      node.setAttribute("type", "checkbox"); // marked's task-list boxes, and nothing else
      node.setAttribute("disabled", "");
    }
  });
  return purify;
}

function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) =>
    ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c],
  );
}

// Kernel-built HTML (a tool card) as nodes; Markdown's HTML goes through DOMPurify instead.
function fragment(html) {
  const t = document.createElement("template");
  t.innerHTML = html;
  return t.content;
}

function clean(html) {
  return LIB.purify.sanitize(html, PURIFY);
}

async function importSource(source) {
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  try {
    return await import(/* webpackIgnore: true */ url);
  } finally {
    URL.revokeObjectURL(url);
  }
}

async function loadLib(model) {
  if (LIB || LIB_WAIT) return;
  try {
    LIB_WAIT = model.widget_manager.get_model(model.get("lib"));
    const lib = await LIB_WAIT;
    const [markedModule, purifyModule] = await Promise.all([
      importSource(lib.get("source")),
      importSource(lib.get("purify")),
    ]);
    const marked = new markedModule.Marked({ gfm: true, breaks: false });
    marked.use({ renderer: { html: (token) => escapeHtml(token.text || token.raw || "") } });
    const purify = purifyModule.default;
    if (!purify || !purify.isSupported) throw new Error("DOMPurify is not supported here");
    LIB = { marked, purify: configure(purify) };
  } catch (err) {
    console.warn("notebook_llm: no Markdown library, the live view shows plain text", err);
    LIB_WAIT = null; // the next view tries again
    return;
  }
  for (const view of WAITERS) view.redraw();
  WAITERS.clear();
}

function apply(pane, ops) {
  for (const op of ops) {
    if (op[0] === "+") {
      const block = { id: op[1], kind: op[2], text: "", html: "" };
      pane.blocks.set(op[1], block);
      pane.order.push(block);
    } else if (op[0] === "=") {
      const card = pane.blocks.get(op[1]);
      card.html = op[2]; // it holds all the arguments so far
      card.text = "";
    } else if (op[0] === "s") {
      pane.stats = op[1];
    } else {
      pane.blocks.get(op[0]).text += op[1];
    }
  }
  for (const view of pane.views) view.update();
}

// One view of a pane: the reasoning (collapsed) on top, then text blocks and tool cards in
// stream order, then the stats line. A Markdown block keeps its finished top-level parts
// rendered once (frozen) and re-renders only the open tail on each update.
class View {
  constructor(pane, label, el) {
    this.pane = pane;
    this.el = el;
    el.classList.add("notebook-llm-live");
    this.think = document.createElement("details");
    this.think.className = "notebook-llm-reasoning";
    this.think.innerHTML = "<summary>Reasoning</summary>";
    this.think.hidden = true;
    this.thinkText = document.createElement("div");
    this.thinkText.style.cssText = "white-space:pre-wrap;opacity:.8;padding:2px 8px";
    this.think.append(this.thinkText);
    this.body = document.createElement("div");
    this.stats = document.createElement("div");
    this.stats.className = "notebook-llm-stats";
    this.stats.style.cssText = "opacity:.75;font-size:90%;margin-top:2px";
    this.label = label;
    this.nodes = new Map();
    el.append(this.think, this.body, this.stats);
    this.update();
  }

  redraw() {
    for (const node of this.nodes.values()) node.remove();
    this.nodes.clear();
    this.thinkText.textContent = "";
    this.thoughts = new Map();
    this.update();
  }

  update() {
    for (const block of this.pane.order) {
      if (block.kind === "think") {
        // each reasoning block its own element and its own count of what it shows
        this.think.hidden = false;
        if (!this.thoughts) this.thoughts = new Map();
        let thought = this.thoughts.get(block.id);
        if (!thought) {
          thought = { el: document.createElement("div"), shown: 0 };
          this.thoughts.set(block.id, thought);
          this.thinkText.append(thought.el);
        }
        if (block.text.length > thought.shown) {
          thought.el.append(block.text.slice(thought.shown));
          thought.shown = block.text.length;
        }
        continue;
      }
      let node = this.nodes.get(block.id);
      if (!node) {
        node = { el: document.createElement("div"), shown: -1, cut: 0 };
        if (block.kind === "md") {
          node.el.className = "jp-RenderedHTMLCommon jp-RenderedMarkdown notebook-llm-md";
          node.frozen = document.createElement("div");
          node.open = document.createElement("div");
          node.el.append(node.frozen, node.open);
        }
        node.remove = () => node.el.remove();
        this.nodes.set(block.id, node);
        this.body.append(node.el);
      }
      if (block.kind === "card") {
        this.card(node, block);
        continue;
      }
      if (node.shown === block.text.length) continue;
      this.markdown(node, block.text);
      node.shown = block.text.length;
    }
    const stats = this.pane.stats;
    if (stats !== this.shownStats) {
      this.shownStats = stats;
      this.stats.innerHTML = `<b>${escapeHtml(this.label)}</b> · ${escapeHtml(stats)}`;
    }
  }

  // A tool card: its HTML (escaped by the kernel) when it changed, then the argument text
  // appended since, as text into its first <pre> (the arguments).
  card(node, block) {
    if (node.html !== block.html) {
      node.el.replaceChildren(fragment(block.html));
      node.html = block.html;
      node.shown = 0;
    }
    if (block.text.length > node.shown) {
      const args = node.el.querySelector("pre");
      if (args) args.append(block.text.slice(node.shown));
      node.shown = block.text.length;
    }
  }

  markdown(node, text) {
    let rest = text.slice(node.cut);
    if (!LIB) {
      WAITERS.add(this);
      node.open.style.whiteSpace = "pre-wrap";
      node.open.textContent = rest;
      return;
    }
    node.open.style.whiteSpace = "";
    const tokens = LIB.marked.lexer(rest);
    let k = tokens.length - 1;
    while (k >= 0 && tokens[k].type === "space") k--;
    let j = k - 1;
    while (j >= 0 && tokens[j].type === "space") j--;
    if (j >= 0 && tokens[j].type === "list") k = j; // a list may go on after a blank line
    if (k > 0) {
      const done = tokens.slice(0, k);
      const raw = done.map((t) => t.raw).join("");
      if (rest.startsWith(raw)) {
        done.links = tokens.links;
        node.frozen.append(clean(LIB.marked.parser(done)));
        node.cut += raw.length;
        rest = rest.slice(raw.length);
      }
    }
    node.open.replaceChildren(clean(LIB.marked.parse(rest)));
  }
}

export default {
  initialize({ model }) {
    const key = model.get("key");
    const pane = { blocks: new Map(), order: [], stats: "", views: new Set() };
    PANES.set(key, pane);
    model.on("msg:custom", (msg) => {
      if (Array.isArray(msg)) apply(pane, msg);
    });
    if (!LIB) loadLib(model);
    return () => PANES.delete(key);
  },
  render({ model, el }) {
    const pane = PANES.get(model.get("key"));
    if (!pane) return;
    const view = new View(pane, model.get("label"), el);
    pane.views.add(view);
    return () => {
      pane.views.delete(view);
      WAITERS.delete(view);
    };
  },
};
