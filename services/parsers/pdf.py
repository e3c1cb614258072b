"""PDF text extraction with pypdf."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from pypdf import PdfReader

from services.core.errors import InvalidArgument
from services.parsers.base import PAGE_BREAK, DocumentParser, ParsedDocument

logger = logging.getLogger(__name__)
# pypdf reports the damage it recovers from ("incorrect startxref pointer") as warnings. In the parser
# worker nothing configures logging, so they would reach the terminal bare (issue 28); a file pypdf
# cannot read fails with its own error instead.
logging.getLogger("pypdf").setLevel(logging.ERROR)

PDF_EXTENSIONS: tuple[str, ...] = (".pdf",)


def _open_reader(data: bytes, name: str) -> PdfReader:
    """Open the PDF; unlock it if it only has an owner password. Raise InvalidArgument otherwise."""
    try:
        reader = PdfReader(io.BytesIO(data))
    except Exception as exc:  # pypdf raises many types for malformed input
        raise InvalidArgument(
            f"{name} is not a readable PDF: {exc}",
            suggestion="Check the file is a complete, uncorrupted PDF (re-download or re-export it).",
        ) from exc
    if reader.is_encrypted and not _try_empty_password(reader):
        raise InvalidArgument(
            f"{name} is an encrypted PDF and needs a password",
            suggestion="Save an unencrypted copy of the PDF (e.g. print to PDF) and add that instead.",
        )
    return reader


def _try_empty_password(reader: PdfReader) -> bool:
    """Decrypt with the empty user password (PDFs that only restrict editing); True on success."""
    try:
        return bool(reader.decrypt(""))
    except Exception as exc:  # missing crypto backend, unsupported algorithm, ...
        logger.debug("could not decrypt PDF with an empty password: %s", exc)
        return False


def _page_texts(reader: PdfReader, name: str) -> list[str]:
    """The stripped text of every page, in order; a blank or unreadable page gives "" (with a warning)."""
    texts: list[str] = []
    for number, page in enumerate(reader.pages, start=1):
        try:
            text = page.extract_text() or ""
        except Exception as exc:  # one broken page should not lose the whole document
            logger.warning("%s: could not extract text from page %d: %s", name, number, exc)
            text = ""
        texts.append(text.replace("\f", " ").strip())
    return texts


def _metadata_title(reader: PdfReader) -> str | None:
    """The document-information title, if set and non-blank."""
    try:
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except Exception as exc:  # malformed info dictionary
        logger.debug("could not read PDF metadata: %s", exc)
        return None
    if isinstance(title, str) and title.strip():
        return title.strip()
    return None


def _page_count(reader: PdfReader, name: str) -> int:
    """Number of pages; a broken page tree makes the PDF unreadable."""
    try:
        return len(reader.pages)
    except Exception as exc:
        raise InvalidArgument(
            f"{name} is not a readable PDF: {exc}",
            suggestion="Check the file is a complete, uncorrupted PDF (re-download or re-export it).",
        ) from exc


class PdfParser(DocumentParser):
    """PDF files: the text of each page, pages separated by PAGE_BREAK (so chunks know their pages)."""

    extensions = PDF_EXTENSIONS

    def parse(self, data: bytes, path: Path | None = None) -> ParsedDocument:
        """Extract text; raise InvalidArgument for corrupt, encrypted or text-less (scanned) PDFs."""
        name = path.name if path is not None else "document"
        reader = _open_reader(data, name)
        pages = _page_count(reader, name)
        texts = _page_texts(reader, name)
        if not any(texts):
            raise InvalidArgument(
                f"{name} has no extractable text ({pages} page(s)); it is probably scanned images",
                suggestion="Run OCR on the PDF first (e.g. `ocrmypdf in.pdf out.pdf`) and add the result.",
            )
        return ParsedDocument(
            content=PAGE_BREAK.join(texts),
            title=_metadata_title(reader),
            document_type="pdf",
            metadata={"pages": pages},
        )
