"""The data path: Produce, Fetch, ListOffsets and InitProducerId."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_res
from kio.schema.init_producer_id.v5 import request as init_producer_id_req
from kio.schema.init_producer_id.v5 import response as init_producer_id_res
from kio.schema.list_offsets.v10 import request as list_offsets_req
from kio.schema.list_offsets.v10 import response as list_offsets_res
from kio.schema.produce.v12 import request as produce_req
from kio.schema.produce.v12 import response as produce_res
from kio.schema.types import BrokerId, ProducerId
from kio.static.primitive import Records, i16, i32, i64
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import E, ms, timestamp
from staticfleet.broker.fetch_wire import RegionFetchResponse
from staticfleet.broker.partitionlog import FileRegion
from staticfleet.broker.registry import (
    NO_THROTTLE,
    ApiError,
    BrokerContext,
    CloseConnection,
    Request,
    Requires,
    kafka_api,
)
from staticfleet.broker.security.acl import AclOperation, ResourceType
from staticfleet.broker.topic_fetch import FetchResult, RegionFetchResult
from staticfleet.broker.topiclog_errors import InvalidRecordError, TopicLogError

ProduceRequest = produce_req.ProduceRequest
FetchRequest = fetch_req.FetchRequest
ListOffsetsRequest = list_offsets_req.ListOffsetsRequest
InitProducerIdRequest = init_producer_id_req.InitProducerIdRequest


# === Produce ==============================================================================================


def _produce_partition(
    ctx: BrokerContext, topic: str, p: produce_req.PartitionProduceData, refused: ErrorCode
) -> produce_res.PartitionProduceResponse:
    error, message = refused, None
    base_offset, append_time, start_offset = -1, -1, -1
    record_errors: tuple[tuple[int, str], ...] = ()
    if not refused:
        try:
            appended = ctx.topics.append(topic, p.index, bytes(p.records or b""))
            base_offset = appended.base_offset
            append_time = appended.log_append_time_ms
            start_offset = appended.log_start_offset
        except InvalidRecordError as exc:
            # Records refused one by one: Kafka names each and gives the partition's log start offset.
            error, message, record_errors = exc.error_code, str(exc), exc.record_errors
            start_offset = ctx.topics.log_start_offset(topic, p.index) if record_errors else -1
        except TopicLogError as exc:
            error, message = exc.error_code, str(exc)
    return produce_res.PartitionProduceResponse(
        index=p.index,
        error_code=error,
        base_offset=i64(base_offset),
        log_append_time=timestamp(append_time),
        log_start_offset=i64(start_offset),
        record_errors=tuple(
            produce_res.BatchIndexAndErrorMessage(batch_index=i32(index), batch_index_error_message=why)
            for index, why in record_errors
        ),
        error_message=message,
    )


def _produce_error(request: Request[ProduceRequest], error: ApiError) -> ResponsePayload | None:
    if not request.body.acks:
        return None  # the producer expects no answer at all
    return produce_res.ProduceResponse(
        throttle_time=NO_THROTTLE,
        responses=tuple(
            produce_res.TopicProduceResponse(
                name=topic.name,
                partition_responses=tuple(
                    produce_res.PartitionProduceResponse(
                        index=p.index,
                        error_code=error.code,
                        base_offset=i64(-1),
                        log_append_time=None,
                        log_start_offset=i64(-1),
                        record_errors=(),
                        error_message=error.message,
                    )
                    for p in topic.partition_data
                ),
            )
            for topic in request.body.topic_data
        ),
    )


@kafka_api(
    "produce",
    (3, 12),
    ProduceRequest,
    error=_produce_error,
    acl=(
        Requires.each(
            AclOperation.WRITE, ResourceType.TOPIC, lambda ctx, r: [t.name for t in r.body.topic_data]
        ),
    ),
)
async def handle_produce(
    ctx: BrokerContext, request: Request[ProduceRequest]
) -> produce_res.ProduceResponse | None:
    # Transactions are not served: a transactional produce is refused.
    refused = E.transactional_id_authorization_failed if request.body.transactional_id is not None else E.none
    writable = {
        t.name
        for t in request.body.topic_data
        if request.allows(AclOperation.WRITE, ResourceType.TOPIC, t.name)
    }
    responses = tuple(
        produce_res.TopicProduceResponse(
            name=topic.name,
            partition_responses=tuple(
                _produce_partition(
                    ctx,
                    topic.name,
                    p,
                    refused or (E.none if topic.name in writable else E.topic_authorization_failed),
                )
                for p in topic.partition_data
            ),
        )
        for topic in request.body.topic_data
    )
    if not request.body.acks:
        if len(writable) < len({t.name for t in request.body.topic_data}):
            raise CloseConnection("acks=0 produce to a topic the producer may not write", "authorization")
        return None  # acks=0: the producer expects no answer at all
    return produce_res.ProduceResponse(throttle_time=NO_THROTTLE, responses=responses)


# === Fetch ================================================================================================


def _fetch_one(
    ctx: BrokerContext, name: str, p: fetch_req.FetchPartition, budget: int, splice: bool
) -> tuple[fetch_res.PartitionData, int, tuple[FileRegion, ...]]:
    """One partition's answer, its size, and (when spliced) its records as file regions."""
    max_bytes = min(budget, p.partition_max_bytes)
    regions: tuple[FileRegion, ...] = ()
    found: RegionFetchResult | FetchResult
    try:
        if splice:
            found = ctx.topics.read_regions(name, p.partition, p.fetch_offset, max_bytes, min_one_batch=True)
            regions, size, records = found.regions, found.size, None
        else:
            copied = ctx.topics.read(name, p.partition, p.fetch_offset, max_bytes, min_one_batch=True)
            found, size, records = copied, len(copied.records), Records(copied.records)
    except TopicLogError as exc:
        # Kafka answers an error with no watermarks (-1), whatever the partition holds.
        return _fetched(p.partition, exc.error_code), 0, ()
    entry = fetch_res.PartitionData(
        partition_index=p.partition,
        error_code=E.none,
        high_watermark=i64(found.high_watermark),
        last_stable_offset=i64(found.last_stable_offset),
        log_start_offset=i64(found.log_start_offset),
        aborted_transactions=None,
        preferred_read_replica=BrokerId(-1),
        records=Records(b"") if splice and not regions else records,
    )
    return entry, size, regions


def _fetched(
    partition: i32, error: ErrorCode, high_watermark: int = -1, start: int = -1
) -> fetch_res.PartitionData:
    return fetch_res.PartitionData(
        partition_index=partition,
        error_code=error,
        high_watermark=i64(high_watermark),
        last_stable_offset=i64(-1),
        log_start_offset=i64(start),
        aborted_transactions=None,
        preferred_read_replica=BrokerId(-1),
        records=None,
    )


def _fetch_error(request: Request[FetchRequest], error: ApiError) -> ResponsePayload:
    # Before v13 the error is also in every partition: older clients read only those.
    return fetch_res.FetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=error.code,
        session_id=request.body.session_id,
        responses=tuple(
            fetch_res.FetchableTopicResponse(
                topic=topic.topic,
                partitions=tuple(_fetched(p.partition, error.code) for p in topic.partitions),
            )
            for topic in request.body.topics
        ),
    )


@kafka_api(
    "fetch",
    (4, 12),
    FetchRequest,
    error=_fetch_error,
    acl=(
        Requires.each(AclOperation.READ, ResourceType.TOPIC, lambda ctx, r: [t.topic for t in r.body.topics]),
    ),
)
async def handle_fetch(
    ctx: BrokerContext, request: Request[FetchRequest]
) -> fetch_res.FetchResponse | RegionFetchResponse:
    body = request.body
    max_wait_s = max(0, ms(body.max_wait)) / 1000
    min_bytes = max(0, int(body.min_bytes))
    max_bytes = int(body.max_bytes)
    readable = {
        t.topic for t in body.topics if request.allows(AclOperation.READ, ResourceType.TOPIC, t.topic)
    }

    def read_all() -> tuple[RegionFetchResponse, int]:
        budget = max_bytes
        total = 0
        out = []
        regions: list[tuple[tuple[FileRegion, ...], ...]] = []
        for topic in body.topics:
            partitions = []
            if topic.topic not in readable:
                refused = tuple(_fetched(p.partition, E.topic_authorization_failed) for p in topic.partitions)
                out.append(fetch_res.FetchableTopicResponse(topic=topic.topic, partitions=refused))
                regions.append(())
                continue
            topic_regions: list[tuple[FileRegion, ...]] = []
            for p in topic.partitions:
                entry, size, found = _fetch_one(
                    ctx, topic.topic, p, max(budget, 0) if total else budget, request.splice
                )
                budget -= size
                total += size
                partitions.append(entry)
                topic_regions.append(found)
            out.append(fetch_res.FetchableTopicResponse(topic=topic.topic, partitions=tuple(partitions)))
            regions.append(tuple(topic_regions))
        response = fetch_res.FetchResponse(
            throttle_time=NO_THROTTLE, error_code=E.none, session_id=i32(0), responses=tuple(out)
        )
        return RegionFetchResponse(response, tuple(regions)), total

    answer, total = read_all()
    if total < min_bytes and max_wait_s > 0:
        positions: dict[tuple[str, int], int] = {
            (topic.topic, p.partition): p.fetch_offset
            for topic in body.topics
            if topic.topic in readable
            for p in topic.partitions
        }
        try:
            if positions and await ctx.topics.wait_for_data(positions, max_wait_s, min_bytes=min_bytes):
                answer.close()
                answer, total = read_all()
            elif not positions:
                await asyncio.sleep(max_wait_s)
        except BaseException:
            answer.close()
            raise
    # Regions only when the server sends them (a spliced connection) and there are some.
    return answer if answer.has_regions else answer.response


# === ListOffsets ==========================================================================================


def _no_offset(
    p: list_offsets_req.ListOffsetsPartition, error: ErrorCode
) -> list_offsets_res.ListOffsetsPartitionResponse:
    return list_offsets_res.ListOffsetsPartitionResponse(
        partition_index=p.partition_index,
        error_code=error,
        timestamp=i64(-1),
        offset=i64(-1),
        leader_epoch=i32(-1),
    )


def _list_offsets_error(request: Request[ListOffsetsRequest], error: ApiError) -> ResponsePayload:
    return list_offsets_res.ListOffsetsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            list_offsets_res.ListOffsetsTopicResponse(
                name=t.name, partitions=tuple(_no_offset(p, error.code) for p in t.partitions)
            )
            for t in request.body.topics
        ),
    )


@kafka_api(
    "list_offsets",
    (1, 10),
    ListOffsetsRequest,
    error=_list_offsets_error,
    acl=(
        Requires.each(
            AclOperation.DESCRIBE, ResourceType.TOPIC, lambda ctx, r: [t.name for t in r.body.topics]
        ),
    ),
)
async def handle_list_offsets(
    ctx: BrokerContext, request: Request[ListOffsetsRequest]
) -> list_offsets_res.ListOffsetsResponse:
    res = list_offsets_res

    def one(
        topic: str, p: list_offsets_req.ListOffsetsPartition
    ) -> list_offsets_res.ListOffsetsPartitionResponse:
        if not request.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            return _no_offset(p, E.topic_authorization_failed)
        try:
            found = ctx.topics.list_offset(topic, p.partition_index, p.timestamp)
        except TopicLogError as exc:
            return _no_offset(p, exc.error_code)
        return res.ListOffsetsPartitionResponse(
            partition_index=p.partition_index,
            error_code=E.none,
            timestamp=i64(found.timestamp),
            offset=i64(found.offset),
            leader_epoch=i32(0 if found.offset >= 0 else -1),
        )

    return res.ListOffsetsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            res.ListOffsetsTopicResponse(name=t.name, partitions=tuple(one(t.name, p) for p in t.partitions))
            for t in request.body.topics
        ),
    )


# === InitProducerId =======================================================================================


def _init_producer_id_error(request: Request[InitProducerIdRequest], error: ApiError) -> ResponsePayload:
    return init_producer_id_res.InitProducerIdResponse(
        throttle_time=NO_THROTTLE, error_code=error.code, producer_id=ProducerId(-1), producer_epoch=i16(-1)
    )


@kafka_api("init_producer_id", (0, 5), InitProducerIdRequest, error=_init_producer_id_error)
async def handle_init_producer_id(
    ctx: BrokerContext, request: Request[InitProducerIdRequest]
) -> ResponsePayload:
    if request.body.transactional_id is not None:  # transactions are not served
        return _init_producer_id_error(request, ApiError(E.coordinator_not_available))
    return init_producer_id_res.InitProducerIdResponse(
        throttle_time=NO_THROTTLE,
        error_code=E.none,
        producer_id=ProducerId(next(iter(ctx.producer_ids))),
        producer_epoch=i16(0),
    )
