"""The Python side of `cargo xtask conformance`: Python's zipfile and openpyxl, as real clients.

Reads a JSON array of requests from the file named first and writes a JSON array of answers
({"ok": value} or {"error": message}) to the file named second. Bytes travel as hex strings.
Written for this suite; nothing here is shipped.
"""

import datetime
import io
import json
import sys
import xml.parsers.expat
import zipfile

import openpyxl


def zip_read(data):
    with zipfile.ZipFile(io.BytesIO(bytes.fromhex(data))) as archive:
        bad = archive.testzip()
        if bad is not None:
            raise ValueError(f"bad CRC in {bad}")
        return {
            info.filename: archive.read(info).hex()
            for info in archive.infolist()
            if not info.is_dir()
        }


def zip_write(files):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, bytes.fromhex(data))
    return out.getvalue().hex()


def cell(value):
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return value


def book_read(data):
    book = openpyxl.load_workbook(io.BytesIO(bytes.fromhex(data)), data_only=True)
    return {
        sheet.title: [[cell(v) for v in row] for row in sheet.iter_rows(values_only=True)]
        for sheet in book.worksheets
    }


def book_write(sheets):
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue().hex()


def well_formed(text):
    """Whether expat, a conforming XML 1.0 parser, accepts the document."""
    parser = xml.parsers.expat.ParserCreate()
    try:
        parser.Parse(text, True)
        return True
    except xml.parsers.expat.ExpatError:
        return False


OPS = {
    "expat.well_formed": lambda r: well_formed(r["text"]),
    "zipfile.read": lambda r: zip_read(r["bytes"]),
    "zipfile.write": lambda r: zip_write(r["files"]),
    "openpyxl.read": lambda r: book_read(r["bytes"]),
    "openpyxl.write": lambda r: book_write(r["sheets"]),
}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        requests = json.load(f)
    answers = []
    for request in requests:
        try:
            answers.append({"ok": OPS[request["op"]](request)})
        except Exception as e:  # every failure is an answer the suite reports
            answers.append({"error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(answers, f)


if __name__ == "__main__":
    main()
