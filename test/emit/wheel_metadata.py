"""Print the METADATA and the file list of a wheel as `RESULT <json>`.

    python wheel_metadata.py WHEEL
"""

import json
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as wheel:
    names = wheel.namelist()
    metadata = next(name for name in names if name.endswith(".dist-info/METADATA"))
    text = wheel.read(metadata).decode("utf-8")
headers = [line.split(": ", 1) for line in text.split("\n\n", 1)[0].splitlines() if ": " in line]
fields = {}
for key, value in headers:
    fields.setdefault(key, []).append(value)
print("RESULT " + json.dumps({"fields": fields, "files": sorted(names)}))
