/* dcc report: the records file as an SVG. */
#include "dcc.h"

int cmd_report(int argc, char **argv)
{
    Args a = parse_args(CMD_REPORT, argc, argv);
    const char *records = a.val[O_RECORDS];
    if (!records)
        usage_error("dcc report needs --records FILE");
    char err[1024];
    SrchRecords *r = srch_records_read(records, 0, NULL, err, sizeof err);
    if (!r)
        fail("%s", err);
    for (int i = 0; i < srch_records_nwarnings(r); i++)
        records_warn(NULL, srch_records_warning(r, i)->msg);
    char *svg = srch_report_svg(r, records, err, sizeof err);
    srch_records_close(r);
    if (!svg)
        fail("%s", err);
    char *path = a.val[O_OUT] ? strdup(a.val[O_OUT]) : aot_path(NULL, records, ".svg", true);
    write_output(&a, path, svg, strlen(svg));
    if (!a.val[O_OUT]) /* where the default put it (-o may be /dev/stdout) */
        fprintf(stderr, "report: %s\n", path);
    free(path);
    free(svg);
    free_args(&a);
    return 0;
}
