"""An example profile's own module (docs/images.md): files under a
profile's files/ are copied over the image's root, and /opt/ci is on the
sandbox's PYTHONPATH, so a session can `import example_docs`."""


def text_of(path):
    """The text of a .docx, .pdf or plain text file."""
    if path.endswith(".docx"):
        import docx
        return "\n".join(p.text for p in docx.Document(path).paragraphs)
    if path.endswith(".pdf"):
        import pypdf
        return "\n".join(page.extract_text() or "" for page in pypdf.PdfReader(path).pages)
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()
