// Behavioural model of the Lattice ECP5 TRELLIS_FF in exactly the configuration rtl/ff.py
// instantiates (a reset tree's branch, a copy of a select register): a rising-edge D flip-flop, clock enable
// always on (CEMUX "1"), LSR tied low, GSR disabled, power-up value 0 (REGSET "RESET", as Yosys's
// own model of the cell starts). It exists so Verilator can lint and simulate the generated cores;
// Yosys never reads it (synth_ecp5 has the cell). Every parameter is checked against that
// configuration at time 0 and LSR on every clock edge: anything else stops the simulation instead
// of being modelled wrongly. Only the ports rtl/ff.py connects are declared.
/* verilator lint_off UNUSEDPARAM */
module TRELLIS_FF (
    input CLK,
    input LSR,
    input DI,
    output reg Q
);
    parameter GSR = "DISABLED";
    parameter CEMUX = "1";
    parameter CLKMUX = "CLK";
    parameter LSRMUX = "LSR";
    parameter REGSET = "RESET";
    parameter SRMODE = "LSR_OVER_CE";

    initial begin
        Q = 1'b0;
        if (GSR != "DISABLED" || CEMUX != "1" || CLKMUX != "CLK" || LSRMUX != "LSR" || REGSET != "RESET"
            || SRMODE != "LSR_OVER_CE") begin
            $display("TRELLIS_FF model: unsupported configuration");
            $finish;
        end
    end

    always @(posedge CLK) begin
        if (LSR) begin
            $display("TRELLIS_FF model: LSR is tied low in rtl/reset_tree.py");
            $finish;
        end
        Q <= DI;
    end
endmodule
