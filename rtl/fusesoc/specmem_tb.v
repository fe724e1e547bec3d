// Self-checking testbench for a generated specmem stream top (FuseSoC target `sim`, Verilator
// --binary). Everything particular to the configuration comes from two files the specmem_rtl
// generator writes beside the Verilog (host/fusesoc_gen.py):
//   specmem_tb_config.vh   `defines: top module, tdata widths, beats per token, tokens,
//                          expected saturation count, timeout in cycles
//   specmem_tb_vectors.vh  in_mem[i] = input beat i; out_mem[i] = expected output beat i
//                          (the fixed-point golden model's outputs, bit for bit)
// The source sends the input beats with pseudo-random idle cycles (tvalid held until the
// handshake, tlast on the last beat of each token); the sink applies pseudo-random
// backpressure and compares every output beat's tdata and tlast in order. After the last
// beat it checks status_tokens, status_framing_errors and status_saturations. It prints
// "PASS" and finishes, or prints each difference and ends with $fatal (non-zero exit).
`timescale 1ns / 1ps
`include "specmem_tb_config.vh"

module specmem_tb;
    localparam integer IN_W = `SPECMEM_TB_IN_WIDTH;
    localparam integer OUT_W = `SPECMEM_TB_OUT_WIDTH;
    localparam integer IN_BEATS = `SPECMEM_TB_IN_BEATS;
    localparam integer OUT_BEATS = `SPECMEM_TB_OUT_BEATS;
    localparam integer TOKENS = `SPECMEM_TB_TOKENS;
    localparam integer N_IN = TOKENS * IN_BEATS;
    localparam integer N_OUT = TOKENS * OUT_BEATS;
    localparam integer TIMEOUT = `SPECMEM_TB_TIMEOUT;

    reg clk = 1'b0;
    reg rst = 1'b1;
    always #5 clk = ~clk;

    reg [IN_W-1:0] in_mem [0:N_IN-1];
    reg [OUT_W-1:0] out_mem [0:N_OUT-1];
    reg [8*1024-1:0] in_file, out_file;
    initial begin
        if (!$value$plusargs("in=%s", in_file)) in_file = "specmem_tb_in.hex";
        if (!$value$plusargs("out=%s", out_file)) out_file = "specmem_tb_out.hex";
        $readmemh(in_file, in_mem);
        $readmemh(out_file, out_mem);
    end

    // 16-bit Fibonacci LFSR: idle gaps on the source, backpressure on the sink
    reg [15:0] lfsr = 16'hace1;
    always @(posedge clk) lfsr <= {lfsr[14:0], lfsr[15] ^ lfsr[13] ^ lfsr[12] ^ lfsr[10]};

    integer n_in = 0;      // input beats accepted
    integer n_out = 0;     // output beats seen
    integer cycles = 0;
    integer mismatches = 0;  // output beats that differ (sink process)
    integer errors = 0;      // failed end checks (main process)

    reg s_tvalid = 1'b0;
    wire s_tready;
    wire [IN_W-1:0] s_tdata = in_mem[n_in < N_IN ? n_in : 0];
    wire s_tlast = (n_in % IN_BEATS) == IN_BEATS - 1;
    wire m_tready = !rst && (lfsr[3] || lfsr[7]);
    wire m_tvalid, m_tlast;
    wire [OUT_W-1:0] m_tdata;
    wire [31:0] status_tokens, status_saturations, status_framing_errors;

    // the tops' other status ports (orthogonal count, stored directions, busy, ...) differ per
    // rule and are left unconnected
    /* verilator lint_off PINMISSING */
    `SPECMEM_TB_TOP dut (
        .clk(clk), .rst(rst),
        .s_axis_tdata(s_tdata), .s_axis_tvalid(s_tvalid), .s_axis_tready(s_tready), .s_axis_tlast(s_tlast),
        .m_axis_tdata(m_tdata), .m_axis_tvalid(m_tvalid), .m_axis_tready(m_tready), .m_axis_tlast(m_tlast),
        .status_tokens(status_tokens), .status_saturations(status_saturations),
        .status_framing_errors(status_framing_errors)
    );
    /* verilator lint_on PINMISSING */

    always @(posedge clk) begin
        cycles <= cycles + 1;
        if (rst) begin
            s_tvalid <= 1'b0;
        end else begin
            // source: a beat is offered until accepted; between beats an idle cycle now and then
            if (s_tvalid && s_tready) n_in <= n_in + 1;
            if (!s_tvalid || s_tready)
                s_tvalid <= (n_in + ((s_tvalid && s_tready) ? 1 : 0) < N_IN) && lfsr[0];
            // sink: every output beat in order against the golden model
            if (m_tvalid && m_tready) begin
                if (n_out >= N_OUT) begin
                    mismatches <= mismatches + 1;
                    $display("FAIL: output beat %0d: more beats than the %0d expected", n_out, N_OUT);
                end else if (m_tdata !== out_mem[n_out] || m_tlast !== ((n_out % OUT_BEATS) == OUT_BEATS - 1)) begin
                    mismatches <= mismatches + 1;
                    $display("FAIL: token %0d beat %0d: tdata %h tlast %b, expected %h tlast %b", n_out / OUT_BEATS,
                             n_out % OUT_BEATS, m_tdata, m_tlast, out_mem[n_out], (n_out % OUT_BEATS) == OUT_BEATS - 1);
                end
                n_out <= n_out + 1;
            end
        end
    end

    initial begin
        repeat (4) @(posedge clk);
        @(negedge clk) rst = 1'b0;  // away from the sampling edge
        while (n_out < N_OUT && cycles < TIMEOUT) @(posedge clk);
        repeat (50) @(posedge clk);  // the counters settle; a stray extra beat would show
        if (n_out < N_OUT) begin
            errors = errors + 1;
            $display("FAIL: timeout after %0d cycles: %0d of %0d input beats sent, %0d of %0d output beats seen",
                     cycles, n_in, N_IN, n_out, N_OUT);
        end
        if (status_tokens !== TOKENS) begin
            errors = errors + 1;
            $display("FAIL: status_tokens %0d, expected %0d", status_tokens, TOKENS);
        end
        if (status_framing_errors !== 0) begin
            errors = errors + 1;
            $display("FAIL: status_framing_errors %0d, expected 0", status_framing_errors);
        end
        if (status_saturations !== `SPECMEM_TB_SATURATIONS) begin
            errors = errors + 1;
            $display("FAIL: status_saturations %0d, expected %0d", status_saturations, `SPECMEM_TB_SATURATIONS);
        end
        if (mismatches + errors != 0)
            $fatal(1, "specmem_tb: %0d output beat(s) and %0d end check(s) failed", mismatches, errors);
        $display("PASS: %0d tokens (%0d input beats, %0d output beats) in %0d cycles: every output beat and the %s",
                 TOKENS, N_IN, N_OUT, cycles, "token, framing-error and saturation counters as the golden model");
        $finish;
    end
endmodule
