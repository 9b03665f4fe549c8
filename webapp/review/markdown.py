"""Task statements are markdown written by strangers: raw HTML off, then an allow-list."""

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

from webapp.review.text import reveal_bidi

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)

_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "pre", "code",
    "em", "strong", "del", "s", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr",
    "th", "td",
}
_ATTRIBUTES = {"a": {"href"}, "ol": {"start"}}


@lru_cache(maxsize=512)
def render_markdown(text: str) -> str:
    """Safe HTML for `text`: links only http(s), no images, scripts, styles or attributes
    beyond the allow-list (so no `hx-*` or `on*` can come through)."""
    html = _md.render(text or "")
    return reveal_bidi(nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    ))
