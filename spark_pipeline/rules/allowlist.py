"""What a rule may call and be built of: the allowlist of Spark functions and SQL constructs, and the bounds.

Default deny: a function of Spark's that is not in FUNCTIONS is refused (`forbidden_function`), whatever it does;
so is any parsed plan node or expression kind not in PARSED_PLANS / PARSED_EXPRESSIONS (`forbidden_syntax`). The
installed plugins (entry point group `headwater.sql_functions`) are allowed besides FUNCTIONS. Why each family is
in or out is in docs/rules.md ("What a rule may call"); DENIED gives the reason shown for the usual suspects.

The bounds (BOUNDS) are checked before Spark parses the SQL (size, nesting, tokens) and on the plans (depth,
nodes, relations, how much bigger than an event a value or the rows of one event may grow, window shapes).
"""

from __future__ import annotations

from dataclasses import dataclass


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Pure, deterministic or harmlessly random, bounded by their inputs or by constant arguments the size check reads.
FUNCTIONS = _names("""
    ! % & * + - / < << <= <=> = == > >= >> >>> ^ | ~ and or not in between if when coalesce ifnull nullif nvl nvl2
    nanvl nullifzero zeroifnull equal_null isnan isnotnull isnull like ilike rlike regexp regexp_like
    cast bigint binary boolean date decimal double float int smallint string tinyint timestamp
    abs acos acosh asin asinh atan atan2 atanh bin bround cbrt ceil ceiling conv cos cosh cot csc degrees div e exp
    expm1 factorial floor greatest hex hypot least ln log log10 log1p log2 mod negative pi pmod positive pow power
    radians rand randn random rint round sec sign signum sin sinh sqrt tan tanh try_add try_divide try_mod
    try_multiply try_subtract unhex uniform width_bucket bit_count bit_get getbit shiftleft shiftright
    shiftrightunsigned
    add_months convert_timezone curdate current_date current_timestamp current_timezone date_add date_diff date_format
    date_from_unix_date date_part date_sub date_trunc dateadd datediff datepart day dayname dayofmonth dayofweek
    dayofyear extract from_unixtime from_utc_timestamp hour last_day localtimestamp make_date make_dt_interval
    make_interval make_timestamp make_timestamp_ltz make_timestamp_ntz make_ym_interval minute month monthname
    months_between next_day now quarter second session_window timestamp_micros timestamp_millis timestamp_seconds
    to_date to_timestamp to_timestamp_ltz to_timestamp_ntz to_unix_timestamp to_utc_timestamp trunc try_make_interval
    try_make_timestamp try_make_timestamp_ltz try_make_timestamp_ntz try_to_date try_to_timestamp unix_date
    unix_micros unix_millis unix_seconds unix_timestamp weekday weekofyear window window_time year
    crc32 hash md5 sha sha1 sha2 xxhash64 hmac aes_encrypt aes_decrypt try_aes_decrypt uuid typeof
    assert_true raise_error
    ascii base64 bit_length btrim char char_length character_length chr concat concat_ws contains decode elt encode
    endswith find_in_set format_number format_string from_base32 initcap instr is_valid_utf8 lcase left len length
    locate lower lpad ltrim luhn_check make_valid_utf8 mask octet_length overlay position printf quote randstr
    regexp_count regexp_extract regexp_extract_all regexp_instr regexp_replace regexp_substr repeat replace right
    rpad rtrim sentences soundex space split split_part startswith substr substring substring_index to_base32
    to_binary to_char to_number to_varchar translate trim try_to_binary try_to_number try_validate_utf8 ucase
    unbase64 upper validate_utf8
    parse_url try_parse_url url_decode try_url_decode url_encode
    array array_append array_compact array_contains array_distinct array_except array_insert array_intersect
    array_join array_max array_min array_position array_prepend array_remove array_repeat array_size array_union
    arrays_overlap arrays_zip flatten get sequence shuffle slice sort_array cardinality element_at reverse size
    try_element_at map map_concat map_contains_key map_entries map_from_arrays map_from_entries map_keys map_values
    str_to_map named_struct struct
    transform filter exists forall array_sort zip_with map_filter map_zip_with transform_keys transform_values
    explode explode_outer posexplode posexplode_outer inline inline_outer stack json_tuple
    from_json get_json_object json_array_length json_object_keys schema_of_json to_json from_csv schema_of_csv to_csv
    any any_value approx_count_distinct approx_percentile avg bit_and bit_or bit_xor bool_and bool_or corr count
    count_if covar_pop covar_samp every first first_value grouping grouping_id histogram_numeric hll_sketch_agg
    hll_union_agg hll_sketch_estimate hll_union kurtosis last last_value max max_by mean min min_by percentile_approx
    regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy skewness some std
    stddev stddev_pop stddev_samp sum try_avg try_sum var_pop var_samp variance
    cume_dist dense_rank lag lead nth_value ntile percent_rank rank row_number
""")

_HOST = "reads the host, the JVM or the Spark session, not the event"
DENIED = {
    **dict.fromkeys(("reflect", "java_method", "try_reflect"), "calls any Java method in the pipeline's JVM"),
    **dict.fromkeys(("input_file_name", "input_file_block_start", "input_file_block_length"),
                    "names files of the pipeline's file system"),
    **dict.fromkeys(("current_user", "user", "session_user", "current_catalog", "current_database",
                     "current_schema", "current_path", "version", "spark_partition_id"), _HOST),
    **dict.fromkeys(("collect_list", "collect_set", "array_agg", "listagg", "string_agg", "collect_union",
                     "percentile", "percentile_cont", "percentile_disc", "median", "mode"),
                    "keeps every value of a group in its state (unbounded); use approx_percentile, "
                    "approx_count_distinct, min, max, first, last"),
    **dict.fromkeys(("aggregate", "reduce"), "an accumulator can double at every element (unbounded size)"),
    **dict.fromkeys(("levenshtein", "jaro_winkler_similarity"), "costs the product of its inputs' lengths"),
    **dict.fromkeys(("from_xml", "schema_of_xml", "to_xml", "xpath", "xpath_boolean", "xpath_double",
                     "xpath_float", "xpath_int", "xpath_long", "xpath_number", "xpath_short", "xpath_string"),
                    "parses XML (external entities, unbounded expansion)"),
    **dict.fromkeys(("from_protobuf", "to_protobuf", "from_avro", "to_avro", "schema_of_avro"),
                    "reads descriptor or schema files, or decodes outside the pipeline's views"),
}

# Parsed (unresolved) plan nodes a rule may hold; anything else (hints, TRANSFORM ... USING, table-valued
# functions, DISTRIBUTE/CLUSTER BY, TABLESAMPLE, EXECUTE IMMEDIATE, pipe syntax, commands, ...) is refused.
PARSED_PLANS = _names("""
    Project Filter Aggregate Join LateralJoin SubqueryAlias UnresolvedRelation UnresolvedWith Union Intersect Except
    Distinct Generate Sort GlobalLimit LocalLimit Offset UnresolvedHaving UnresolvedSubqueryColumnAliases
    WithWindowDefinition LocalRelation OneRowRelation Pivot Unpivot
""")

# Parsed expression kinds: syntax (operators, CASE, CAST, literals, lambdas, subqueries, windows); every function
# call is an UnresolvedFunction or UnresolvedGenerator, checked by name against FUNCTIONS.
PARSED_EXPRESSIONS = _names("""
    UnresolvedAlias UnresolvedAttribute UnresolvedExtractValue UnresolvedFunction UnresolvedGenerator UnresolvedOrdinal
    UnresolvedStar UnresolvedStarExceptOrReplace UnresolvedRegex UnresolvedNamedLambdaVariable UnresolvedCollation
    UnresolvedWindowExpression UnresolvedSubqueryColumnAliases
    Alias AttributeReference Literal NamePlaceholder$ LambdaFunction
    Add Subtract Multiply Divide IntegralDivide Remainder UnaryMinus UnaryPositive Abs
    BitwiseAnd BitwiseOr BitwiseXor BitwiseNot ShiftLeft ShiftRight ShiftRightUnsigned
    And Or Not EqualTo EqualNullSafe GreaterThan GreaterThanOrEqual LessThan LessThanOrEqual In InSubquery IsNull
    IsNotNull Like ILike RLike LikeAny LikeAll NotLikeAny NotLikeAll
    CaseWhen If Cast Collate Concat CreateNamedStruct CreateArray CreateMap
    StringLocate StringTrim StringTrimLeft StringTrimRight StringTrimBoth Substring Overlay Extract
    TimestampAdd TimestampDiff CurrentDate CurrentTimestamp
    Exists ListQuery ScalarSubquery LateralSubquery
    GroupingSets Cube Rollup SortOrder AggregateExpression First Last
    WindowExpression WindowSpecDefinition WindowSpecReference SpecifiedWindowFrame UnspecifiedFrame$ CurrentRow$
    UnboundedPreceding$ UnboundedFollowing$
""")

# Analysed plan nodes outside the views (which are not looked into: the pipeline built them).
ANALYSED_PLANS = _names("""
    Project Filter Aggregate Join LateralJoin SubqueryAlias View Union Intersect Except Distinct Deduplicate Generate
    Sort GlobalLimit LocalLimit Offset Window Expand WithCTE CTERelationDef CTERelationRef LocalRelation OneRowRelation
    EventTimeWatermark
""")

# Resolved expression kinds refused wherever they appear, however they were reached (e.g. `current_user` written
# without parentheses parses as a column, then resolves to CurrentUser): the allowlist's second line.
ANALYSED_DENIED = _names("""
    CallMethodViaReflection TryReflect InputFileName InputFileBlockStart InputFileBlockLength CurrentUser
    CurrentDatabase CurrentCatalog CurrentSchema CurrentPath SparkVersion SparkPartitionID ScalaUDF ScalaUDAF
    ScalaAggregator HiveSimpleUDF HiveGenericUDF HiveGenericUDTF HiveUDAFFunction PythonUDAF PythonUDTF
    AvroDataToCatalyst CatalystDataToAvro ProtobufDataToCatalyst CatalystDataToProtobuf ArrayAggregate
    Levenshtein CollectList CollectSet Percentile Mode Median ListAgg XmlToStructs
""")


@dataclass(frozen=True)
class Bounds:
    """The sandbox's limits (docs/rules.md, "Limits")."""

    max_nesting: int = 32  # parentheses and brackets, before Spark parses (its parser explodes on deep nesting)
    max_tokens: int = 4_000  # words, numbers and symbols outside strings and comments, before Spark parses
    max_depth: int = 128  # plan and expression tree depth, after parsing
    max_nodes: int = 5_000  # plan and expression nodes, after parsing
    max_relations: int = 8  # view references (each is a read of its topic)
    max_amplification: float = 64.0  # a value at most this many times an event's size (and as many rows/event)
    max_constant_bytes: int = 1 << 20  # the part of a value's size that does not depend on the event
    max_constant_rows: int = 100_000  # rows one event may make through generators, beyond the amplification
    max_count: int = 10_000  # repeat/array_repeat/sequence counts, pad lengths, format widths
    max_window_s: int = 7 * 86_400  # window length
    max_windows_per_event: int = 100  # sliding windows: length / slide
    max_session_gap_s: int = 86_400
    max_interval_s: int = 366 * 86_400  # any interval literal
    min_rsd: float = 0.01  # approx_count_distinct's relative standard deviation (state per group)
    max_accuracy: int = 100_000  # approx_percentile's accuracy (state per group)
    max_hll_lg_k: int = 16  # hll_sketch_agg's lgConfigK (state per group: 2^k bytes)


BOUNDS = Bounds()
