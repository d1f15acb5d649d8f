"""The event log's lines as the analysis holds them: every input line read once, as one compact row.

A row has the line's status, the fields some table reads and where the line was read. What every line
repeats is held as numbers in one struct, `core`: the event type, group state and status as codes
(`schema.TYPE_CODES`, ...), the file as a 64-bit key, and the time, version and generation. Caching
the rows then spends nothing on the texts of every line: the in-memory cache would look each value of
a text column up in a table of those seen, to choose a compression, at a cost that shows. The file
key is a salted hash of the file's name (`input_file_name()`), the salt chosen so that no two input
files share a key; `Census` names the files again, with their modification times.

Every function here is lazy (DataFrames in, DataFrames out) but `read`, which lists the input files,
and `Census.of`, which reads the rows of `splits`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple
from urllib.parse import unquote, urlparse

import xxhash
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StringType

from staticfleet.analytics import jvm_lines
from staticfleet.analytics import schema as s
from staticfleet.analytics.inputs import Sources, is_remote
from staticfleet.analytics.operator_events import FLEET_OPERATION_STARTED
from staticfleet.coordinator import events as ev

_OK = s.STATUS_CODES[s.OK]
_ANALYSED = [name for name, _ in s.ANALYSED_FIELDS]
_KEEP_MALFORMED = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": s.CORRUPT}
"""A line that does not parse fills the corrupt-record field, and what could be read of it the others."""
_WHERE = ("file_key", "source_mtime", "source_offset", "source_row")
"""Where a line was read, in `core`: the file's key, and for an events table read again (a Parquet log
with the `source_*` columns) its own modification time; the split's offset and the line's row id."""


@dataclass(frozen=True)
class Lines:
    """The rows of `read`: `frame` as described above; the listed input files by key, and their
    modification times (ms)."""

    frame: DataFrame
    salt: int
    files: Mapping[int, str]
    mtimes: Mapping[str, int]


def read(spark: SparkSession, sources: Sources, salt: int = 0, strict: bool = False) -> Lines:
    """Every input line as a row. `salt` is the least salt to try for the file keys. `strict`: JSON
    lines parsed by `jvm_lines` (registered in this session), any line it does not take marked as
    malformed, for the caller to read the input again without it."""
    readers: list[tuple[DataFrame, bool]] = []
    if sources.json:
        reader = _strict_reader(spark, sources.json) if strict else _json_reader(spark, sources.json)
        readers.append((reader, True))
    if sources.parquet:
        readers.append((spark.read.parquet(*sources.parquet), False))
    # The files each reader lists, less an events table's: its rows name their own files.
    listed = [reader.inputFiles() for reader, is_json in readers if is_json or not _has_sources(reader)]
    names = sorted({name for names in listed for name in names})
    salt, files = salted_keys(names, salt)
    remote = [path for path in (*sources.json, *sources.parquet) if is_remote(path)]
    mtimes = modification_times(spark, names, remote)
    held = [
        _json_lines(reader, salt, strict) if is_json else _parquet_lines(reader, salt)
        for reader, is_json in readers
    ]
    frame = held[0]
    for other in held[1:]:
        frame = frame.unionByName(other)
    return Lines(frame, salt, files, mtimes)


def file_key(salt: int, name: Column) -> Column:
    """A file's key: a 64-bit hash of a salt and the file's name (Spark's `xxhash64`)."""
    return F.xxhash64(F.lit(salt).cast("long"), name)


def file_key_of(salt: int, name: str) -> int:
    """`file_key` computed here: the same 64-bit hash, by the same algorithm (XXH64, its seed the hash
    of the salt with Spark's seed, 42)."""
    seed = xxhash.xxh64_intdigest(struct.pack("<q", salt), seed=42)
    key = xxhash.xxh64_intdigest(name.encode("utf-8"), seed=seed)
    return key - (1 << 64) if key >= 1 << 63 else key


def salted_keys(names: Sequence[str], least: int = 0) -> tuple[int, dict[int, str]]:
    """The first salt from `least` under which no two of these file names share a key, and the keys."""
    for salt in itertools.count(least):
        files = {file_key_of(salt, name): name for name in names}
        if len(files) == len(set(names)):
            return salt, files
    raise AssertionError("unreachable")


def modification_times(spark: SparkSession, names: Sequence[str], remote: Sequence[str]) -> dict[str, int]:
    """The modification time (ms) of each of these files (named as `input_file_name()` names them):
    local files from the file system, remote ones from Spark's listing of the `remote` paths. A file
    gone since it was listed has none."""
    return {**local_modification_times(names), **listed_modification_times(spark, names, remote)}


def local_modification_times(names: Sequence[str]) -> dict[str, int]:
    """The modification times of those of these files that are local (`file:` names)."""
    found: dict[str, int] = {}
    for name in names:
        where = urlparse(name)
        if where.scheme == "file":
            with contextlib.suppress(OSError):
                found[name] = os.stat(unquote(where.path)).st_mtime_ns // 1_000_000
    return found


def listed_modification_times(
    spark: SparkSession, names: Sequence[str], paths: Sequence[str]
) -> dict[str, int]:
    """The modification times of these files as Spark lists them under `paths` (no content read)."""
    if not paths:
        return {}
    listed = spark.read.format("binaryFile").load(list(paths))
    rows = listed.select(F.input_file_name().alias("name"), F.unix_millis("modificationTime").alias("mtime"))
    wanted = set(names)
    return {row["name"]: int(row["mtime"]) for row in rows.collect() if row["name"] in wanted}


def _json_reader(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Spark's JSON-lines reader, for the analysed fields and `members` as text: the parser skips the
    other fields without building them, and copies `members` as it stands, to be decoded where it is
    a rebalance_completed's member list. A line that does not parse keeps its text in the corrupt
    record field and gives what could be read of it. Like the reader, a line holding a JSON array
    counts as the values in it."""
    schema = s.event_schema(jvm_lines.READ_FIELDS)
    return spark.read.schema(schema).options(**_KEEP_MALFORMED).json(list(paths))


def _strict_reader(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """The lines as text, each parsed by `jvm_lines`: the JSON reader's rows, a line it does not take
    in the corrupt-record field. The text reader splits the files as the JSON reader does."""
    parsed = F.call_function(jvm_lines.FUNCTION, F.col("value")).alias("line")
    return spark.read.text(list(paths)).select(parsed).select("line.*")


def _read_where(salt: int) -> list[Column]:
    """Where each line of a file read now was: its file's key and split, and a row id that orders the
    rows of one split. Not `_metadata`: any of its fields costs a copy of every row."""
    return [
        file_key(salt, F.input_file_name()).alias("file_key"),
        F.lit(None).cast("timestamp").alias("source_mtime"),  # the file's, from `Census`
        F.expr("input_file_block_start()").alias("source_offset"),
        # Rows of one file split share a partition, in line order: this id orders them.
        F.monotonically_increasing_id().alias("source_row"),
    ]


def _json_lines(read: DataFrame, salt: int, keyed: bool) -> DataFrame:
    """`keyed`: read by `jvm_lines`, which gives a completed rebalance's members keyed already."""
    kind = F.col("type")
    members = F.col(jvm_lines.PER_MEMBER) if keyed else F.from_json(F.col("members"), s.members_schema())
    fields = read.select(
        *_read_where(salt),
        F.lit(None).cast("string").alias("source_path"),
        *_ANALYSED,
        _status(F.col(s.CORRUPT).isNotNull()).alias("status"),
        F.col(s.CORRUPT).alias("_line"),
        F.when(kind == ev.REBALANCE_COMPLETED, members).alias("_members"),
        F.when(kind == ev.GROUP_LOADED, F.col("members").try_cast("int")).alias("_count"),
    )
    return _held(fields, F.col("_members"), F.col("_count"), F.col("_line"), keyed)


def _has_sources(frame: DataFrame) -> bool:
    return all(name in frame.columns for name in s.SOURCE_COLUMNS)


def _parquet_lines(frame: DataFrame, salt: int) -> DataFrame:
    """Parquet event logs: the known columns, cast to the event schema; missing ones are null. A row
    that is not an event keeps its `raw_line` if it has one (an events table), else its columns as
    JSON text. An events table keeps its `source_*` columns as the log order."""
    present = {field.name: field.dataType for field in frame.schema.fields}
    columns = []
    for name, kind in s.EVENT_FIELDS:
        if name not in present:
            columns.append(F.lit(None).cast(kind).alias(name))
        elif kind == "string" and not isinstance(present[name], StringType):
            columns.append(F.to_json(F.col(name)).alias(name))
        else:
            columns.append(F.col(name).try_cast(kind).alias(name))
    given = F.col("raw_line").cast("string") if "raw_line" in present else F.lit(None).cast("string")
    if _has_sources(frame):
        path = F.col("source_file").cast("string")
        where = [
            file_key(salt, path).alias("file_key"),
            F.col("source_mtime").try_cast("timestamp").alias("source_mtime"),
            F.col("source_offset").try_cast("long").alias("source_offset"),
            F.col("source_row").try_cast("long").alias("source_row"),
            path.alias("source_path"),
        ]
    else:
        where = [*_read_where(salt), F.lit(None).cast("string").alias("source_path")]
    typed = frame.select(*columns, *where, given.alias("_given_line"))
    as_read = F.to_json(F.struct(*[F.col(name) for name, _ in s.EVENT_FIELDS]))
    fields = typed.select(
        F.coalesce(F.col("_given_line"), as_read).alias("_line"),
        *_WHERE,
        "source_path",
        *_ANALYSED,
        _status(_not_json(F.col("_given_line"))).alias("status"),
        "members",
    )
    event_type = F.col("type")
    members = F.when(event_type == ev.REBALANCE_COMPLETED, F.from_json(F.col("members"), s.members_schema()))
    count = F.when(event_type == ev.GROUP_LOADED, F.col("members").try_cast("int"))
    return _held(fields, members, count, F.col("_line"))


def _not_json(line: Column) -> Column:
    """A line kept in an events table that does not parse as an event (parsed again: these are few)."""
    parsed = F.from_json(line, s.event_schema(), _KEEP_MALFORMED)
    return line.isNotNull() & parsed[s.CORRUPT].isNotNull()


def _status(malformed: Column) -> Column:
    """The status code of a line."""
    missing = F.col("v").isNull() | F.col("ts").isNull() | F.col("type").isNull()
    missing = missing | F.col("group").isNull() | (F.col("group") == "")
    codes = s.STATUS_CODES
    return (
        F.when(malformed, F.lit(codes[s.MALFORMED]))
        .when(missing, F.lit(codes[s.MISSING_FIELDS]))
        .when(F.col("v") != s.SCHEMA_VERSION, F.lit(codes[s.UNSUPPORTED_VERSION]))
        .otherwise(F.lit(_OK))
    )


def _coded(text: Column, codes: Mapping[str, int]) -> Column:
    """The code of a text (`schema.OTHER` for a text not in `codes`), null where the text is."""
    chosen = F.when(text.isNull(), F.lit(None).cast("int"))
    for name, code in codes.items():
        chosen = chosen.when(text == name, F.lit(code))
    return chosen.otherwise(F.lit(s.OTHER))


def _named(code: Column, names: Sequence[str], other: Column) -> Column:
    """The text of a code made by `_coded`."""
    chosen = F.when(code.isNull(), F.lit(None).cast("string"))
    for number, name in enumerate(names, start=1):
        chosen = chosen.when(code == number, F.lit(name))
    return chosen.otherwise(other)


def _held(
    fields: DataFrame, members: Column, loaded_count: Column, line: Column, keyed: bool = False
) -> DataFrame:
    """The rows as held: member count and assignment from the members, the codes, the line where it is
    not an event. Each member's entries come in one projection of their own, so they are made once:
    already keyed by the line parser (`keyed`), else keyed here from the decoded member list."""
    decoded = fields.select(
        "*",
        (members if keyed else F.transform(members, _member_keys)).alias("_per_member"),
        loaded_count.alias("_loaded_count"),
        _coded(F.col("type"), s.TYPE_CODES).alias("_type"),
        _coded(F.col("state"), s.STATE_CODES).alias("_state"),
    )
    per_member = F.col("_per_member")
    counted = decoded.select(
        *fields.columns,
        "_type",
        "_state",
        F.coalesce(F.size(per_member), F.col("_loaded_count")).alias("member_count"),
        # Null when any member's assignment is unknown (not the consumer protocol, undecodable).
        F.flatten(F.transform(per_member, lambda member: member["keys"])).alias("_keys"),
        F.flatten(
            F.transform(
                per_member,
                lambda member: F.transform(member["keys"], lambda key: key.bitwiseXOR(member["owner"])),
            )
        ).alias("_pairs"),
    )
    code = F.col("_type")
    # A completed rebalance with an unknown assignment still has a struct (of nulls): it is the
    # previous assignment of the next one, which then has no partitions-moved count.
    assignment = F.when(
        code == s.TYPE_CODES[ev.REBALANCE_COMPLETED],
        F.struct(F.col("_pairs").alias("pairs"), F.col("_keys").alias("keys")),
    )
    episode: list[str | Column] = [*s.EPISODE_FIELDS, "member_count", assignment.alias("assignment")]
    core = F.struct(
        F.col("status"),
        code.alias("type"),
        F.col("_state").alias("state"),
        F.col("group"),
        *s.CORE_NUMBERS,
        *_WHERE,
    )
    return counted.select(
        core.alias("core"),
        F.when(code == s.OTHER, F.col("type")).alias("other_type"),
        F.when(F.col("_state") == s.OTHER, F.col("state")).alias("other_state"),
        _packed(code, s.MEMBERSHIP_TYPES, s.MEMBER_FIELDS).alias("member"),
        _packed(code, (*s.EPISODE_START, *s.EPISODE_CLOSERS), episode).alias("episode"),
        _packed(code, s.OPERATOR_TYPES, s.OPERATOR_FIELDS).alias("operator"),
        F.when(F.col("status") != _OK, line).alias("raw_line"),
        "source_path",  # an events table's own file name; null for the files read now
    )


def _packed(code: Column, types: Sequence[str], fields: Sequence[str | Column]) -> Column:
    """The fields of one kind of event as a struct, set on events of that kind only."""
    return F.when(code.isin(*[s.TYPE_CODES[t] for t in types]), F.struct(*fields))


def _member_keys(member: Column) -> Column:
    """A member's assignment as numbers: a key for each of its partitions, the 64-bit hash of the topic
    plus the partition, and a 64-bit hash of its owner (the instance id, else the member id). A
    (partition, owner) pair is then the key xor the owner's hash: numbers keep the comparison of two
    generations to arrays of longs, and the only texts hashed are the topic's and the owner's, never a
    text made for each partition."""
    owner = F.coalesce(member["instance_id"], member["member_id"])
    keys = F.flatten(
        F.transform(
            F.map_entries(member["assignment"]),
            lambda topic: F.transform(topic["value"], lambda partition: F.xxhash64(topic["key"]) + partition),
        )
    )
    return F.struct(F.xxhash64(owner).alias("owner"), keys.alias("keys"))


# === reading the rows ===============================================================================


def is_type(*types: str) -> Column:
    """Whether a row of `analysed` (or anything with its `type_code`) is an event of these types."""
    return F.col("type_code").isin(*[s.TYPE_CODES[t] for t in types])


def type_name(code: Column | None = None, other: Column | None = None) -> Column:
    return _named(
        F.col("type_code") if code is None else code,
        s.EVENT_TYPES,
        F.col("other_type") if other is None else other,
    )


def state_name(code: Column | None = None, other: Column | None = None) -> Column:
    return _named(
        F.col("state_code") if code is None else code,
        s.STATES,
        F.col("other_state") if other is None else other,
    )


def status_name(code: Column) -> Column:
    return _named(code, s.STATUSES, F.lit(None).cast("string"))


def analysed(lines: Lines) -> DataFrame:
    """The events (lines with status ok), each field a column; the type and state as codes
    (`type_code`, `state_code`, with `other_type` and `other_state`), the file as its key."""
    core = F.col("core")
    return lines.frame.filter(core["status"] == _OK).select(
        core["group"].alias("group"),
        core["type"].alias("type_code"),
        "other_type",
        core["state"].alias("state_code"),
        "other_state",
        *[core[name].alias(name) for name in s.CORE_NUMBERS],
        "member.*",
        "episode.*",
        "operator.*",
        *[core[name].alias(name) for name in _WHERE],
    )


def unpacked(lines: Lines) -> DataFrame:
    """Every row with its texts: status, type, group and state as text, each field a column, and the
    `source_*` columns with the file's name and modification time."""
    core = F.col("core")
    key = core["file_key"]
    names = _literal_map({k: name for k, name in lines.files.items()}, "string")
    mtimes = _literal_map({k: lines.mtimes.get(name) for k, name in lines.files.items()}, "long")
    return lines.frame.select(
        status_name(core["status"]).alias("status"),
        type_name(core["type"]).alias("type"),
        core["group"].alias("group"),
        state_name(core["state"]).alias("state"),
        *[core[name].alias(name) for name in s.CORE_NUMBERS],
        "member.*",
        "episode.*",
        "operator.*",
        "raw_line",
        F.coalesce(F.col("source_path"), names[key]).alias("source_file"),
        F.coalesce(core["source_mtime"], F.timestamp_millis(mtimes[key])).alias("source_mtime"),
        core["source_offset"].alias("source_offset"),
        core["source_row"].alias("source_row"),
    )


def _literal_map(values: Mapping[int, object], kind: str) -> Column:
    pairs = [F.lit(part) for key, value in values.items() for part in (key, value)]
    return F.create_map(*pairs).cast(f"map<bigint,{kind}>")


# === the first pass: lines per status, file split and type ==========================================


def splits(lines: Lines) -> DataFrame:
    """Lines per (status, file split, event type), with the type's first and last time: a few rows per
    split that give the line counts, the splits, and the events by type (read by `Census.of`). The type
    is null on lines that are not events, so what a rejected line says cannot multiply the rows. The
    first action over the cached lines, so it is what builds the cache."""
    core = F.col("core")
    ok = core["status"] == _OK
    return lines.frame.groupBy(
        core["status"].alias("status"),
        core["file_key"].alias("file_key"),
        F.col("source_path"),
        F.unix_millis(core["source_mtime"]).alias("source_mtime"),
        core["source_offset"].alias("source_offset"),
        F.when(ok, core["type"]).alias("type_code"),
        F.when(ok, F.col("other_type")).alias("other_type"),
    ).agg(
        F.count("*").alias("count"),
        F.min(core["ts"]).alias("first_ts"),
        F.max(core["ts"]).alias("last_ts"),
        F.count_if(
            ok & (core["type"] == s.TYPE_CODES[FLEET_OPERATION_STARTED]) & F.col("operator")["id"].isNull()
        ).alias("starts_without_id"),
        F.count_if(~ok & F.col("raw_line").isNull()).alias("lines_without_text"),
    )


class Split(NamedTuple):
    """A file split, as ordered in the log: file modification time, file name, offset."""

    mtime_ms: int | None
    path: str
    offset: int
    file_key: int


@dataclass(frozen=True)
class Census:
    """What the first pass over the lines (`splits`) found."""

    lines: dict[str, int]
    """Lines per status."""
    by_type: dict[str, tuple[int, int, int]]
    """Event type -> (events, first ts, last ts)."""
    splits: tuple[Split, ...]
    """In log order."""
    files: dict[int, str]
    """File key -> file name, of every file with lines."""
    starts_without_id: int
    files_to_reread: tuple[str, ...]
    """Files with rejected lines whose text the JSON reader did not keep (it keeps it only for lines
    that do not parse)."""
    ambiguous: bool
    """Two files named in the data (an events table read again) share a key with each other or with a
    listed file: the lines must be read again with another salt."""

    @classmethod
    def of(cls, rows: Sequence[Row], lines: Lines) -> Census:
        """From the rows of `splits` over these lines."""
        counts: dict[str, int] = {}
        by_type: dict[str, tuple[int, int, int]] = {}
        names: dict[int, set[str]] = {}
        found: dict[tuple[int, int], tuple[int | None, str]] = {}
        rereads: set[str] = set()
        for row in rows:
            status = s.STATUSES[row["status"] - 1]
            count = int(row["count"])
            counts[status] = counts.get(status, 0) + count
            key = row["file_key"]
            path = row["source_path"] or lines.files[key]
            names.setdefault(key, set()).add(path)
            mtime = row["source_mtime"] if row["source_path"] else lines.mtimes.get(path)
            where = (key, row["source_offset"])
            known = found.get(where)
            if known is None or (mtime is not None and (known[0] is None or mtime < known[0])):
                found[where] = (mtime, path)
            if row["lines_without_text"]:
                rereads.add(path)
            if row["type_code"] is not None:
                kind = (
                    row["other_type"] if row["type_code"] == s.OTHER else s.EVENT_TYPES[row["type_code"] - 1]
                )
                first, last = int(row["first_ts"]), int(row["last_ts"])
                if kind in by_type:
                    seen = by_type[kind]
                    count, first, last = seen[0] + count, min(seen[1], first), max(seen[2], last)
                by_type[kind] = (count, first, last)
        in_order = sorted(
            (Split(mtime, path, offset, key) for (key, offset), (mtime, path) in found.items()),
            key=lambda split: (split.mtime_ms is not None, split.mtime_ms or 0, split.path, split.offset),
        )
        return cls(
            lines=counts,
            by_type=by_type,
            splits=tuple(in_order),
            files={key: min(paths) for key, paths in names.items()},
            starts_without_id=sum(int(row["starts_without_id"]) for row in rows),
            files_to_reread=tuple(sorted(rereads)),
            ambiguous=any(len(paths) > 1 for paths in names.values()),
        )


# === the lines that are not events ==================================================================


def local_frame(spark: SparkSession, **columns: tuple[str, Sequence[object]]) -> DataFrame:
    """A small table of these columns (name=(type, values)), made in the JVM: a table made from Python
    rows would start a Python worker to read them, which costs more than the rest of the query."""
    arrays = [
        F.array(*[F.lit(value) for value in values]).cast(f"array<{kind}>")
        for kind, values in columns.values()
    ]
    zipped = F.arrays_zip(*arrays)
    rows = spark.range(1).select(F.explode(zipped).alias("row"))
    return rows.select(*[F.col("row")[str(i)].alias(name) for i, name in enumerate(columns)])


def rejected(spark: SparkSession, lines: Lines, census: Census) -> DataFrame:
    """The lines that are not events, with why, where they were, the line, and what could be read of
    it (parsed again here: these are few). A rejected line that parsed as JSON has no text in the rows;
    those are read again from their files (`Census.files_to_reread`)."""
    shown = [name for name, _ in s.EVENT_FIELDS if name != "members"]
    core = F.col("core")
    kept = lines.frame.filter((core["status"] != _OK) & F.col("raw_line").isNotNull()).select(
        status_name(core["status"]).alias("status"),
        "raw_line",
        *[core[name].alias(name) for name in _WHERE],
        "source_path",
        F.from_json(F.col("raw_line"), s.event_schema(), _KEEP_MALFORMED).alias("_read"),
    )
    if census.files_to_reread:
        kept = kept.unionByName(_reread(spark, census.files_to_reread, lines.salt))
    keys = list(census.files)
    files = local_frame(
        spark,
        file_key=("bigint", keys),
        _name=("string", [census.files[key] for key in keys]),
        _mtime=("bigint", [lines.mtimes.get(census.files[key]) for key in keys]),
    )
    named = kept.join(F.broadcast(files), "file_key", "left")
    return named.select(
        "status",
        "raw_line",
        F.coalesce(F.col("source_path"), F.col("_name")).alias("source_file"),
        F.coalesce(F.col("source_mtime"), F.timestamp_millis(F.col("_mtime"))).alias("source_mtime"),
        "source_offset",
        "source_row",
        *[F.col("_read")[name].alias(name) for name in shown],
    )


def _reread(spark: SparkSession, files: Sequence[str], salt: int) -> DataFrame:
    """The lines of these JSON-lines files that parse but are not events (fields missing, another
    schema version), with their text. They are read again as text and parsed as the JSON reader
    parses them, so the same lines are found: a line holding a JSON array counts as its values."""
    schema = s.event_schema()
    lines = spark.read.text(list(files)).select(F.col("value").alias("raw_line"), *_read_where(salt))
    line = F.col("raw_line")
    values = F.when(line.rlike(r"^\s*\["), F.from_json(line, ArrayType(schema))).otherwise(
        F.array(F.from_json(line, schema, _KEEP_MALFORMED))
    )
    read = lines.select("raw_line", *_WHERE, F.explode(values).alias("_read"))
    status = _status(F.lit(False))
    return (
        read.select("*", *[F.col("_read")[name].alias(name) for name in ("v", "ts", "type", "group")])
        .filter(F.col("_read").isNotNull() & F.col("_read")[s.CORRUPT].isNull())
        .select(status.alias("_status"), "raw_line", *_WHERE, "_read")
        .filter(F.col("_status") != _OK)
        .select(
            status_name(F.col("_status")).alias("status"),
            "raw_line",
            *_WHERE,
            F.lit(None).cast("string").alias("source_path"),
            "_read",
        )
    )
