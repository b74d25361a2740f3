"""openenv's own validator run by the hub: a folder's report and a running server's, each filed unchanged per
environment revision."""

from conformance.validator.run import OPENENV_VERSION, ValidationLevel, Validator, ValidatorTimeoutError
from conformance.validator.store import file_report, get_validation, list_validations, validated_revisions

__all__ = [
    "OPENENV_VERSION",
    "ValidationLevel",
    "Validator",
    "ValidatorTimeoutError",
    "file_report",
    "get_validation",
    "list_validations",
    "validated_revisions",
]
