from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from compaction.store import register_after_summary
        from conversations.services import register_after_append
        from core.metrics import register_collector
        from memory.grep import grep_memory
        from memory.index_lag import collect
        from memory.index_queue import schedule_after_append
        from memory.summaries import schedule_after_summary
        from retrieval.grep import register_meaning_search

        # API-ingested messages get chunked and embedded by a background job; so do the
        # summaries a compaction commits (grep's semantic and hybrid modes search them).
        register_after_append(schedule_after_append)
        register_after_summary(schedule_after_summary)
        register_meaning_search(grep_memory)  # grep's semantic and hybrid modes
        _register_part_reader()
        register_collector(collect)  # indexing lag on /metrics
        _register_turn_memory()
        _register_receipt_items()


def _register_receipt_items() -> None:
    """Retrieved chunks named in receipts (docs/receipts.md)."""
    from memory.receipt_items import read_chunks
    from receipts.items import register_item_reader

    register_item_reader("chunk", read_chunks)


def _register_part_reader() -> None:
    from integrity.part_readers import register_part_reader
    from memory.indexing import part_ordinals

    register_part_reader("memory.indexing", part_ordinals)


def _register_turn_memory() -> None:
    """Retrieval, tools and indexing for the turn engine (turns/memory_port.py)."""
    from memory import indexing, tools, turn_retrieval
    from turns.memory_port import TurnMemory, register_turn_memory

    register_turn_memory(
        TurnMemory(
            retrieve_for_turn=turn_retrieval.retrieve_for_turn,
            chunks_by_id=turn_retrieval.chunks_by_id,
            index_turn=indexing.index_turn,
            tool_definitions=tools.definitions,
            execute_tool=tools.execute,
        )
    )
