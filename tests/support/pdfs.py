"""PDFs made by the tests with pypdf: a page of text, a page of one image, an encrypted one."""

from __future__ import annotations

import io

from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject


def pdf(text: str | None = None, *, image: bool = False, password: str = "") -> bytes:
    """A one-page PDF: a line of text in Helvetica, and/or a one-pixel grey image; encrypted with a password."""
    writer = PdfWriter()
    page = writer.add_blank_page(width=612, height=792)
    drawn = b""
    if text is not None:
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        fonts = DictionaryObject({NameObject("/F1"): writer._add_object(font)})
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        drawn += f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET\n".encode("latin-1")
    if image:  # an inline image: what a scanned page is made of
        drawn += b"q 200 0 0 200 72 400 cm BI /W 1 /H 1 /CS /G /BPC 8 ID \x80 EI Q\n"
    if drawn:
        content = DecodedStreamObject()
        content.set_data(drawn)
        page[NameObject("/Contents")] = writer._add_object(content)
    if password:
        writer.encrypt(password, algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def paged_pdf(pages: list[list[str]]) -> bytes:
    """A PDF of several pages, each of the given lines (Latin-1) in Helvetica, top to bottom."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    fonts = DictionaryObject({NameObject("/F1"): writer._add_object(font)})
    for lines in pages:
        page = writer.add_blank_page(width=612, height=792)
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): fonts})
        drawn = ["BT /F1 10 Tf 14 TL 50 750 Td"]
        for line in lines:
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            drawn.append(f"({escaped}) Tj T*")
        drawn.append("ET")
        content = DecodedStreamObject()
        content.set_data("\n".join(drawn).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(content)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()
