"""The database refuses rewriting the turn transcript and committed states.

- a turn's `user_message` never changes; its `final_assistant_message` is written once;
- a step's `request_json` never changes; its `response_json` is written once;
- a state checkpoint is never updated (pins, commits and rollbacks insert new states);
- states, turns and steps are never deleted.

PostgreSQL: plpgsql trigger functions. SQLite: RAISE(ABORT) triggers. `TRUNCATE`
(PostgreSQL test flushes) fires no row trigger; on SQLite the DELETE triggers stand
aside while a row sits in the unmanaged `turns_delete_permit` table, which only the
test harness's flush writes (tests/conftest.py), never the application.
"""

from django.db import migrations

PG = [
    """CREATE OR REPLACE FUNCTION lcm_turns_refuse_rewrite() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         IF TG_TABLE_NAME = 'turns_userturn' THEN
           IF NEW.user_message IS DISTINCT FROM OLD.user_message THEN
             RAISE EXCEPTION 'turns_userturn.user_message is immutable'
               USING ERRCODE = 'integrity_constraint_violation';
           END IF;
           IF OLD.final_assistant_message IS NOT NULL
              AND NEW.final_assistant_message IS DISTINCT FROM OLD.final_assistant_message THEN
             RAISE EXCEPTION 'turns_userturn.final_assistant_message is immutable once written'
               USING ERRCODE = 'integrity_constraint_violation';
           END IF;
         ELSIF TG_TABLE_NAME = 'turns_providerstep' THEN
           IF NEW.request_json IS DISTINCT FROM OLD.request_json THEN
             RAISE EXCEPTION 'turns_providerstep.request_json is immutable'
               USING ERRCODE = 'integrity_constraint_violation';
           END IF;
           IF OLD.response_json IS NOT NULL
              AND NEW.response_json IS DISTINCT FROM OLD.response_json THEN
             RAISE EXCEPTION 'turns_providerstep.response_json is immutable once written'
               USING ERRCODE = 'integrity_constraint_violation';
           END IF;
         ELSE
           RAISE EXCEPTION '% rows are immutable', TG_TABLE_NAME
             USING ERRCODE = 'integrity_constraint_violation';
         END IF;
         RETURN NEW;
       END $$""",
    """CREATE OR REPLACE FUNCTION lcm_turns_refuse_delete() RETURNS trigger
       LANGUAGE plpgsql AS $$
       BEGIN
         RAISE EXCEPTION '% rows are never deleted', TG_TABLE_NAME
           USING ERRCODE = 'integrity_constraint_violation';
       END $$""",
    "CREATE TRIGGER turns_userturn_immutable BEFORE UPDATE ON turns_userturn "
    "FOR EACH ROW EXECUTE FUNCTION lcm_turns_refuse_rewrite()",
    "CREATE TRIGGER turns_providerstep_immutable BEFORE UPDATE ON turns_providerstep "
    "FOR EACH ROW EXECUTE FUNCTION lcm_turns_refuse_rewrite()",
    "CREATE TRIGGER turns_statecheckpoint_immutable BEFORE UPDATE ON turns_statecheckpoint "
    "FOR EACH ROW EXECUTE FUNCTION lcm_turns_refuse_rewrite()",
    *(
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION lcm_turns_refuse_delete()"
        for table in ("turns_statecheckpoint", "turns_userturn", "turns_providerstep")
    ),
]

SQLITE = [
    "CREATE TABLE IF NOT EXISTS turns_delete_permit (permit INTEGER NOT NULL)",
    """CREATE TRIGGER turns_userturn_user_message_immutable
       BEFORE UPDATE OF user_message ON turns_userturn
       WHEN NEW.user_message IS NOT OLD.user_message
       BEGIN SELECT RAISE(ABORT, 'turns_userturn.user_message is immutable'); END""",
    """CREATE TRIGGER turns_userturn_answer_immutable
       BEFORE UPDATE OF final_assistant_message ON turns_userturn
       WHEN OLD.final_assistant_message IS NOT NULL
            AND NEW.final_assistant_message IS NOT OLD.final_assistant_message
       BEGIN SELECT RAISE(ABORT,
         'turns_userturn.final_assistant_message is immutable once written'); END""",
    """CREATE TRIGGER turns_providerstep_request_immutable
       BEFORE UPDATE OF request_json ON turns_providerstep
       WHEN NEW.request_json IS NOT OLD.request_json
       BEGIN SELECT RAISE(ABORT, 'turns_providerstep.request_json is immutable'); END""",
    """CREATE TRIGGER turns_providerstep_response_immutable
       BEFORE UPDATE OF response_json ON turns_providerstep
       WHEN OLD.response_json IS NOT NULL AND NEW.response_json IS NOT OLD.response_json
       BEGIN SELECT RAISE(ABORT,
         'turns_providerstep.response_json is immutable once written'); END""",
    """CREATE TRIGGER turns_statecheckpoint_immutable BEFORE UPDATE ON turns_statecheckpoint
       BEGIN SELECT RAISE(ABORT, 'turns_statecheckpoint rows are immutable'); END""",
    *(
        f"""CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table}
            WHEN NOT EXISTS (SELECT 1 FROM turns_delete_permit)
            BEGIN SELECT RAISE(ABORT, '{table} rows are never deleted'); END"""
        for table in ("turns_statecheckpoint", "turns_userturn", "turns_providerstep")
    ),
]


def forward(apps, schema_editor):
    statements = PG if schema_editor.connection.vendor == "postgresql" else SQLITE
    for statement in statements:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("turns", "0001_initial")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop, elidable=False)]
