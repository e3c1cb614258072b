-- Page numbers of chunks of paged documents (PDF pages, PPTX slides): first and last page the
-- chunk's text is on, 1-based. NULL for documents without pages.
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS page_start integer;
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS page_end integer;
